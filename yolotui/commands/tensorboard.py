"""`yolotui tensorboard [RUN ...] [--port P] [--host H] [--print]`: TensorBoard on localhost over the runs.

The runs named (every run yolotui knows when none is named), each under its name: engine runs' event files in
their folders, official runs' own TensorBoard folder, a backend's recorded save_dir (yolotui.jobs.tensorboard).
TensorBoard runs in the foreground until Ctrl-C. `--print` prints the command instead of running it. Without
the `tensorboard` extra it says how to install it.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Runs, where to listen, and --print."""
    from yolotui.jobs.tensorboard import DEFAULT_HOST, DEFAULT_PORT

    parser.add_argument("runs", nargs="*", metavar="RUN", help="run names or folders (default: every run)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port to serve on (default {DEFAULT_PORT}; 0: any free port)")
    parser.add_argument("--host", default=DEFAULT_HOST,
                        help=f"address to listen on (default {DEFAULT_HOST}: this machine only; over SSH "
                             "forward the port: ssh -L 6006:localhost:6006 HOST)")
    parser.add_argument("--print", dest="print_only", action="store_true",
                        help="print the TensorBoard command and the folders instead of starting it")


def run(args: argparse.Namespace) -> int:
    """Build the command, then print it (--print) or run TensorBoard until it ends or Ctrl-C."""
    import shlex
    import subprocess
    import sys

    from yolotui.jobs.tensorboard import choose_runs, tensorboard_command

    runs = choose_runs(list(args.runs))
    argv = tensorboard_command(runs, host=args.host, port=args.port)
    shown = [r for r in runs if r.folders]
    for logs in runs:
        if logs.folders:
            print(f"{logs.name}: " + ", ".join(str(f) for f in logs.folders), file=sys.stderr)
        elif args.runs:
            print(f"{logs.name}: {logs.note}", file=sys.stderr)
    if args.print_only:
        print(shlex.join(argv))
        return 0
    print(f"TensorBoard over {len(shown)} run{'s' if len(shown) != 1 else ''} on http://{args.host}:{args.port}/ "
          "(Ctrl-C stops it; from another machine: ssh -L PORT:localhost:PORT this-host)", file=sys.stderr, flush=True)
    try:
        return subprocess.call(argv)
    except KeyboardInterrupt:
        return 0
