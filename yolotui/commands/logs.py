"""`yolotui logs RUN [--follow] [--tail N] [--level L]`: print a run's train.log; with --follow, keep printing until
it ends; with --level, only lines at that level or above (yolotui.runs.logconfig.level_of_line: the `LEVEL: `
prefix of yolotui's own records, else what the text shows; attempt markers always)."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `yolotui logs`."""
    parser.add_argument("run", metavar="RUN", help="run name (see `yolotui ls`) or run folder")
    parser.add_argument("-f", "--follow", action="store_true", help="keep printing new output until the run ends")
    parser.add_argument("-n", "--tail", type=int, default=None, metavar="N", help="start with the last N lines")
    parser.add_argument("--level", default=None, type=str.upper, choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                        help="only lines at this level or above")
    parser.add_argument("--interval", type=float, default=0.25, help=argparse.SUPPRESS)


def _tail_offset(path, lines: int) -> int:
    """The byte offset where the last `lines` lines of `path` start."""
    import os

    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        block = 64 * 1024
        pos = size
        data = b""
        while pos > 0 and data.count(b"\n") <= lines:
            step = min(block, pos)
            pos -= step
            handle.seek(pos)
            data = handle.read(step) + data
    cut = len(data)
    for _ in range(lines + (1 if data.endswith(b"\n") else 0)):
        cut = data.rfind(b"\n", 0, cut)
        if cut < 0:
            return pos
    return pos + cut + 1


def run(args: argparse.Namespace) -> int:
    """Print (and follow) train.log."""
    import sys

    from yolotui.errors import UserError
    from yolotui.runs.layout import TRAIN_LOG
    from yolotui.runs.resolve import resolve_run

    run_dir = resolve_run(args.run)
    path = run_dir / TRAIN_LOG
    if args.tail is not None and args.tail < 0:
        raise UserError(f"--tail must be 0 or more (got {args.tail})")
    out = sys.stdout.buffer
    offset = 0
    if args.tail is not None and path.exists():
        offset = _tail_offset(path, args.tail)

    def pump() -> None:
        nonlocal offset
        try:
            with open(path, "rb") as handle:
                handle.seek(offset)
                data = handle.read()
        except FileNotFoundError:
            return
        if data and args.level:
            data = data[: data.rfind(b"\n") + 1]  # whole lines only: a partial one waits for its end
            offset += len(data)
            out.write(_filtered(data, args.level))
            out.flush()
            return
        if data:
            out.write(data)
            out.flush()  # BrokenPipeError (`yolotui logs RUN | head`) is caught in run()
            offset += len(data)

    try:
        return _print_and_follow(run_dir, path, args, pump)
    except BrokenPipeError:
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _filtered(data: bytes, level: str) -> bytes:
    """The lines of `data` at `level` or above."""
    import logging

    from yolotui.runs.logconfig import level_of_line

    floor = logging.getLevelName(level)
    lines = data.decode("utf-8", "replace").splitlines(keepends=True)
    return "".join(line for line in lines if level_of_line(line) >= floor).encode("utf-8")


def _print_and_follow(run_dir, path, args, pump) -> int:
    """Print what is there; with --follow, keep printing until the run is no longer live."""
    import sys
    import time

    from yolotui.runs.layout import LIVE_STATES
    from yolotui.runs.status import effective_state

    pump()
    if not args.follow:
        if not path.exists():
            print(f"run {run_dir.name} has no train.log yet", file=sys.stderr)
        return 0
    try:
        while effective_state(run_dir) in LIVE_STATES:
            time.sleep(args.interval)
            pump()
        pump()
    except KeyboardInterrupt:
        return 0
    print(f"[yolotui: run {run_dir.name} is {effective_state(run_dir)}]", file=sys.stderr)
    return 0
