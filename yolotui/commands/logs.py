"""`yolotui logs RUN [--follow] [--tail N] [--raw] [--level L]`: print a run's train.log; with --follow, until it
ends. With --level, only lines at that level or above (yolotui.logconfig.level_of_line: the `LEVEL: `
prefix of yolotui's own records, else what the text shows; attempt markers always).

Progress-bar lines show their final state and repeated tracebacks are collapsed (yolotui/logtext.py), as
in the dashboard's log pane; --raw prints the bytes as they are.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `yolotui logs`."""
    parser.add_argument("run", metavar="RUN", help="run name (see `yolotui ls`) or run folder")
    parser.add_argument("-f", "--follow", action="store_true", help="keep printing new output until the run ends")
    parser.add_argument("-n", "--tail", type=int, default=None, metavar="N", help="start with the last N lines")
    parser.add_argument("--raw", action="store_true",
                        help="print the file as it is (every progress-bar redraw, every repeated traceback)")
    parser.add_argument("--level", default=None, type=str.upper, choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                        help="only lines at this level or above")
    parser.add_argument("--interval", type=float, default=0.25, help=argparse.SUPPRESS)


READ_BYTES = 4 * 1024 * 1024  # one read of train.log: a long log is printed in pieces, never held whole
EARLIER_BYTES = 2 * 1024 * 1024  # at most this much of train.1.log (what a cut kept: head and tail)


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
    import os

    from yolotui.logtext import LogCleaner
    from yolotui.runs.logcap import previous_path

    cleaner = None if args.raw else LogCleaner()

    def pump(final: bool = False) -> None:
        """Print what was appended since the last call, in bounded reads; a cut log is read from its start."""
        nonlocal offset
        while True:
            try:
                with open(path, "rb") as handle:
                    if os.fstat(handle.fileno()).st_size < offset:  # cut by the supervisor (runs/logcap.py)
                        offset = 0
                    handle.seek(offset)
                    data = handle.read(READ_BYTES)
            except FileNotFoundError:
                return
            more = len(data) == READ_BYTES
            offset += emit(data, final and not more, more)
            if not more:
                return

    def emit(data: bytes, final: bool, more: bool) -> int:
        """Print `data` (whole lines unless `final`); returns the bytes consumed."""
        if cleaner is not None:  # whole lines only, each in its final state (see yolotui/logtext.py)
            end = len(data) if final else data.rfind(b"\n") + 1
            end = end or (len(data) if more else 0)  # one line longer than a read: printed in pieces
            lines = data[:end].decode("utf-8", errors="replace").split("\n")
            shown = cleaner.feed(lines[:-1] if lines and lines[-1] == "" else lines)
            if final:
                shown += cleaner.flush()
            shown = _at_level(shown, args.level)
            if shown:
                out.write(("\n".join(shown) + "\n").encode("utf-8"))
                out.flush()
            return end
        if data and args.level:  # --raw --level: whole lines, unchanged, filtered
            end = len(data) if final else data.rfind(b"\n") + 1
            end = end or (len(data) if more else 0)  # one line longer than a read: printed in pieces
            kept = _at_level(data[:end].decode("utf-8", errors="replace").splitlines(keepends=True), args.level)
            out.write("".join(kept).encode("utf-8"))
            out.flush()
            return end
        if data:
            out.write(data)
            out.flush()  # BrokenPipeError (`yolotui logs RUN | head`) is caught in run()
        return len(data)

    try:
        if args.tail is None:  # the head and last lines of output the supervisor cut from train.log, if any
            try:
                with open(previous_path(path), "rb") as handle:
                    earlier = handle.read(EARLIER_BYTES)  # head + tail (yolotui.runs.logcap)
            except OSError:
                earlier = b""
            if earlier:
                emit(earlier if earlier.endswith(b"\n") else earlier + b"\n", False, True)
        return _print_and_follow(run_dir, path, args, pump)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _at_level(lines: list[str], level: str | None) -> list[str]:
    """The `lines` at `level` or above (all of them without a level)."""
    if not level:
        return lines
    import logging

    from yolotui.logconfig import level_of_line

    floor = logging.getLevelName(level)
    return [line for line in lines if level_of_line(line) >= floor]


def _print_and_follow(run_dir, path, args, pump) -> int:
    """Print what is there; with --follow, keep printing until the run is no longer live."""
    import sys
    import time

    from yolotui.runs.layout import LIVE_STATES
    from yolotui.runs.status import effective_state

    pump(final=not args.follow)
    if not args.follow:
        if not path.exists():
            print(f"run {run_dir.name} has no train.log yet", file=sys.stderr)
        return 0
    try:
        while effective_state(run_dir) in LIVE_STATES:
            time.sleep(args.interval)
            pump()
        pump(final=True)
    except KeyboardInterrupt:
        return 0
    print(f"[yolotui: run {run_dir.name} is {effective_state(run_dir)}]", file=sys.stderr)
    return 0
