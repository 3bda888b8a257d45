"""`yolotui exec [--name N] [--project DIR] [--exist-ok] [--max-restarts N] -- CMD ...`: supervise any command.

The command runs detached under the supervisor in PROJECT/NAME (numbered exp, exp2 ... unless --exist-ok);
this prints the run folder and returns at once.
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `yolotui exec`."""
    parser.add_argument("--name", default="exp", help="run name, a single folder name (default: exp)")
    parser.add_argument("--project", default="runs/exec", help="parent folder of the run (default: runs/exec)")
    parser.add_argument("--exist-ok", action="store_true", help="reuse PROJECT/NAME instead of numbering a new one")
    parser.add_argument("--max-restarts", type=int, default=0, metavar="N",
                        help="restart the command up to N times when it fails (default: 0)")
    parser.add_argument("--save-signal", action="store_true",
                        help="the command writes a checkpoint on SIGUSR1 (enables `yolotui save`)")
    from yolotui.commands._runflags import add_run_flags

    add_run_flags(parser)
    parser.add_argument("cmd_argv", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the command to run")


def run(args: argparse.Namespace) -> int:
    """Create the run folder and start the supervised command."""
    from pathlib import Path

    from yolotui.errors import UserError
    from yolotui.runs.launcher import check_command, launch
    from yolotui.runs.store import create_run_dir, validate_name

    command = list(args.cmd_argv)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UserError("no command given: put it after '--', e.g. yolotui exec -- python train.py")
    if args.max_restarts < 0:
        raise UserError(f"--max-restarts must be 0 or more (got {args.max_restarts})")
    validate_name(args.name)
    check_command(command)
    from yolotui.commands._runflags import run_extra

    extra = {**run_extra(args), **({"save_signal": True} if args.save_signal else {})}
    run_dir = create_run_dir(Path(args.project), args.name, exist_ok=args.exist_ok)
    launch(run_dir, command, name=run_dir.name, backend="exec", max_attempts=args.max_restarts + 1, extra=extra)
    print(run_dir)
    from yolotui.runs.logout import launch_lines_for

    for line in launch_lines_for(run_dir):  # how it survives logout
        print(line, file=sys.stderr)
    print(f"started run {run_dir.name}; follow: yolotui logs {run_dir.name} --follow; "
          f"stop: yolotui stop {run_dir.name}", file=sys.stderr)
    return 0
