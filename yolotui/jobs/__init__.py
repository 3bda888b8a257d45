"""The use cases: what a user can do to a run, shared by the CLI (yolotui.commands) and the TUI.

UI-free and torch-free; typed inputs and results (dataclasses); failures are UserError with a one-line
reason. Nothing here prints: callers show the returned warnings and results their own way.

Modules: launch (option files + start the trainer via a backend), new_run (train/demo), resume (the one
resume pipeline for every backend), foreign (a new run from another trainer's backend plan), finetune
(source resolution + new run), exec_run (any command), control (stop, save), rm (forget runs), doctor (advice for a run or a checkpoint), results (what --json prints), queue
(--after / --when-free for a new run), compare (runs side by side), notify_test (a test notification),
runextras (notifications, stall timeout, logging added to run.yaml).
"""
