"""`yolotui rm RUN... [--files]`: forget ended runs (finished, failed, stopped, interrupted); live ones are refused.

Without --files the run folders stay on disk and only leave `yolotui ls` and the TUI's list.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `yolotui rm`."""
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run names (see `yolotui ls`) or run folders")
    parser.add_argument("--files", action="store_true", help="also delete the run folders from disk")


def run(args: argparse.Namespace) -> int:
    """Remove the runs and say what happened to each."""
    from yolotui.jobs.rm import RemoveRequest, remove

    result = remove(RemoveRequest(list(args.runs), files=args.files))
    for run_dir in result.removed:
        print(f"{'deleted' if run_dir in result.deleted else 'removed from the list'}: {run_dir}")
    return 0
