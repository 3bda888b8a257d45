"""One module per `yolotui` subcommand; each provides `add_arguments(parser)` and `run(args) -> int`.

Modules import their heavy dependencies (torch, textual) inside `run`, so `--help` and the fast
commands never pay for them.
"""
