"""`yolotui exec [--name N] [--project DIR] [--exist-ok] [--max-restarts N] -- CMD ...`: supervise any command.

The command runs detached under the supervisor in PROJECT/NAME (numbered exp, exp2 ... unless --exist-ok);
this prints the run folder and returns at once.
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `yolotui exec`."""
    parser.add_argument("--name", default=None, help="run name, a single folder name (default: exp; for the official train_dual.py its --name)")
    parser.add_argument("--project", default=None, help="parent folder of the run (default: runs/exec; for the official train_dual.py its --project)")
    parser.add_argument("--exist-ok", action="store_true", help="reuse PROJECT/NAME instead of numbering a new one")
    parser.add_argument("--max-restarts", type=int, default=0, metavar="N",
                        help="restart the command up to N times when it fails (default: 0)")
    parser.add_argument("--save-signal", action="store_true",
                        help="the command writes a checkpoint on SIGUSR1 (enables `yolotui save`)")
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
    from yolotui.backends import official

    recognised = official.recognise_command(command)
    if recognised is not None:  # the official trainer: the same as `yolotui train --backend official`
        return _exec_official(args, recognised)
    args.name = args.name or "exp"
    validate_name(args.name)
    check_command(command)
    run_dir = create_run_dir(Path(args.project or "runs/exec"), args.name, exist_ok=args.exist_ok)
    extra = {"save_signal": True} if args.save_signal else None
    launch(run_dir, command, name=run_dir.name, backend="exec", max_attempts=args.max_restarts + 1, extra=extra)
    print(run_dir)
    from yolotui.runs.logout import launch_lines_for

    for line in launch_lines_for(run_dir):  # how it survives logout
        print(line, file=sys.stderr)
    print(f"started run {run_dir.name}; follow: yolotui logs {run_dir.name} --follow; "
          f"stop: yolotui stop {run_dir.name}", file=sys.stderr)
    return 0


def _exec_official(args: argparse.Namespace, recognised) -> int:
    """`yolotui exec -- python train_dual.py ...`: supervised as the official backend (progress, resume)."""
    from pathlib import Path

    from yolotui.backends import official

    run_dir, lines = official.launch_official(
        recognised, max_attempts=args.max_restarts + 1,
        project=Path(args.project) if args.project else None, name=args.name,
        exist_ok=True if args.exist_ok else None)
    print(run_dir)
    for line in lines:
        print(line, file=sys.stderr)
    print(f"recognised the official trainer ({recognised.script} in {recognised.repo}): started run {run_dir.name} "
          f"with the official backend; follow: yolotui attach {run_dir.name}; stop: yolotui stop {run_dir.name}",
          file=sys.stderr)
    return 0
