"""`yolotui` / `yolotui tui [--theme NAME]`: open the terminal UI on the table of runs."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--theme."""
    parser.add_argument("--theme", metavar="NAME", default=None,
                        help="colour theme (yolo-night, yolo-paper, yolo-phosphor or a Textual one); remembered")


def run(args: argparse.Namespace) -> int:
    """Open the TUI on the runs table."""
    from yolotui.tui.app import run_app

    return run_app(None, theme=args.theme)
