"""The use cases: what a user can do to a run, shared by the CLI (yolotui.commands) and the TUI.

UI-free and torch-free; typed inputs and results (dataclasses); failures are UserError with a one-line reason.
Nothing here prints: callers show the returned warnings and results their own way.

- new_run.py (train: options checked, run folder, start), launch.py (option files + the backend's command
  under the supervisor), preflight.py (checks before anything detaches), queue.py (--after / --when-free),
  demo.py;
- resume.py (the one resume pipeline for every backend: resolve, verdict, lock, the backend's plan, trust,
  writes, launch), finetune.py (a new run from another run's weights), foreign.py (a new run from another
  trainer's backend plan), exec_run.py (any command, the exec backend);
- control.py (stop, save), rm.py (forget runs), doctor.py (advice for a run or a checkpoint), compare.py (runs
  side by side), tensorboard.py (which folders hold TensorBoard files, asked of the backend), runextras.py
  (notifications, stall timeout, logging, trackers added to run.yaml).
"""
