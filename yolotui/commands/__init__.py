"""One module per `yolotui` subcommand; each provides `add_arguments(parser)` and `run(args) -> int`.

Modules import their heavy dependencies (torch, textual) inside `run`, so `--help` and the fast commands never
pay for them.

Subcommands: attach.py, check_data.py, compare.py, demo.py, demo_data.py, doctor.py, exec_cmd.py (`exec`),
export.py, finetune.py, gpu.py, logs.py, ls.py, model_info.py, notify.py, restore_cmd.py (`restore`),
resume.py, rm.py, save.py, serve.py, service.py, status.py, stop.py, tensorboard.py, train.py, tui.py, val.py,
completion.py (shell completion scripts), hosts.py (`hosts add|ls|rm`), watch.py (a run as lines, --json).

Shared by several subcommands: _distributed.py (the torchrun process-layout flags), _launch.py (saying where a
started run lives and following it), _options.py (options spelled one way everywhere), _progress.py
(plain-text progress of a run), _runflags.py (notifications, watchdog, logging, mirror flags), _runfmt.py
(plain tables), _slurm.py (`--slurm`), _trackerflags.py (experiment-tracker flags), _completion_scripts.py (the bash/zsh/fish scripts drawn from the parser),
_fleet_ls.py (`ls --all-hosts`), _remote.py (`--host HOST` / `HOST:RUN`: the same command on that host).
"""
