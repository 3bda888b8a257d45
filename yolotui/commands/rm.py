"""`yolotui rm RUN... [--files]`: forget ended runs (finished, failed, stopped, interrupted); live ones are refused.

Without --files the run folders stay on disk and only leave `yolotui ls` and the TUI's list. With --files
only indexed runs with a status.json are deleted, never through a symbolic link; a plain name is the indexed
run of that name before any folder of that name here; a run folder that is not in the index is deleted only
after a yes on the terminal (yolotui.jobs.rm).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `yolotui rm`."""
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run names (see `yolotui ls`) or run folders")
    parser.add_argument("--files", action="store_true", help="also delete the run folders from disk")


def ask(folder: Path) -> bool:
    """On a terminal: ask before deleting a run folder that yolotui does not list; elsewhere: no."""
    from yolotui.formatting import printable

    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return False
    try:
        answer = input(f"{printable(str(folder))} is not in yolotui's list of runs; delete it and everything in it? "
                       "[y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def run(args: argparse.Namespace) -> int:
    """Remove the runs and say what happened to each."""
    from yolotui.formatting import printable
    from yolotui.jobs.rm import RemoveRequest, remove

    result = remove(RemoveRequest(list(args.runs), files=args.files, confirm=ask))
    for run_dir in result.removed:
        print(f"{'deleted' if run_dir in result.deleted else 'removed from the list'}: {printable(str(run_dir))}")
    return 0
