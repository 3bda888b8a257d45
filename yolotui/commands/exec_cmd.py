"""`yolotui exec [--name N] [--project DIR] [--exist-ok] [--max-restarts N] [--json] -- CMD ...`: supervise any command.

The command runs detached under the supervisor in PROJECT/NAME (numbered exp, exp2 ... unless --exist-ok);
this prints the run folder (or, with --json, the run as JSON) and returns at once. See yolotui.jobs.exec_run.
"""

from __future__ import annotations

import argparse
import shlex
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `yolotui exec`."""
    from yolotui.commands._options import add_json

    parser.add_argument("--name", default=None,
                        help="run name, a single folder name (default: exp; for the official train_dual.py its --name)")
    parser.add_argument("--project", default=None,
                        help="parent folder of the run (default: runs/exec; for the official train_dual.py its "
                             "--project)")
    parser.add_argument("--exist-ok", action="store_true", help="reuse PROJECT/NAME instead of numbering a new one")
    parser.add_argument("--max-restarts", type=int, default=0, metavar="N",
                        help="restart the command up to N times when it fails (default: 0)")
    parser.add_argument("--save-signal", action="store_true",
                        help="the command writes a checkpoint on SIGUSR1 (enables `yolotui save`)")
    add_json(parser)
    from yolotui.commands._runflags import add_run_flags

    add_run_flags(parser)
    from yolotui.commands._slurm import add_slurm_flags

    add_slurm_flags(parser)
    parser.add_argument("cmd_argv", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the command to run")


def run(args: argparse.Namespace) -> int:
    """Create the run folder and start the supervised command."""
    import json

    from yolotui.commands._runflags import extras_from
    from yolotui.commands._slurm import slurm_options
    from yolotui.jobs.exec_run import ExecRequest, exec_run

    result = exec_run(ExecRequest(list(args.cmd_argv), name=args.name, project=args.project,
                                  exist_ok=args.exist_ok, max_restarts=args.max_restarts,
                                  save_signal=args.save_signal, extras=extras_from(args),
                                  slurm=slurm_options(args)))
    run_dir = result.run_dir
    for line in [f"warning: {w}" for w in result.warnings] + list(result.notes):
        print(line, file=sys.stderr)
    print(json.dumps(result.to_json()) if args.json else run_dir)
    from yolotui.placement.logout import launch_lines_for

    for line in launch_lines_for(run_dir):  # how it survives logout
        print(line, file=sys.stderr)
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for note in result.notes:
        print(note, file=sys.stderr)
    print(f"started run {run_dir.name}; follow: yolotui logs {shlex.quote(run_dir.name)} --follow; "
          f"stop: yolotui stop {shlex.quote(run_dir.name)}", file=sys.stderr)
    return 0
