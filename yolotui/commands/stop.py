"""`yolotui stop RUN [--force] [--grace S]`: stop a run (SIGTERM, SIGKILL after the grace period) and wait."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `yolotui stop`."""
    parser.add_argument("run", metavar="RUN", help="run name (see `yolotui ls`) or run folder")
    parser.add_argument("--force", action="store_true", help="SIGKILL at once, without waiting for a checkpoint")
    parser.add_argument("--grace", type=float, default=30.0, metavar="S",
                        help="seconds between SIGTERM and SIGKILL (default: 30)")
    parser.add_argument("--no-wait", action="store_true", help="return once the stop is requested")


def run(args: argparse.Namespace) -> int:
    """Stop the run and report what was sent."""
    import sys

    from yolotui.jobs.control import StopRequest, resolve, stop
    from yolotui.runs.layout import LIVE_STATES
    from yolotui.runs.status import effective_state

    run_dir = resolve(args.run)
    if not args.no_wait and effective_state(run_dir) in LIVE_STATES:
        how = "SIGKILL now" if args.force else f"grace {args.grace:g} s"
        print(f"stopping {run_dir.name} ({how})...", file=sys.stderr, flush=True)
    result = stop(StopRequest(run_dir, force=args.force, grace_s=args.grace, wait=not args.no_wait))
    print(result.message)
    if result.was_running and not args.no_wait and result.state in LIVE_STATES:
        return 1
    return 0
