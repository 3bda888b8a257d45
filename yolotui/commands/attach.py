"""`yolotui attach RUN [--theme NAME]`: open a run's live dashboard (reattach after an SSH drop)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """RUN and --theme."""
    parser.add_argument("run", metavar="RUN", help="run folder, or the name of an indexed run")
    parser.add_argument("--theme", metavar="NAME", default=None, help="colour theme (remembered)")


def resolve(value: str) -> Path:
    """RUN as a folder: a run folder path, or the name of an indexed run."""
    from yolotui.runs.resolve import resolve_run

    return Path(resolve_run(value))


def run(args: argparse.Namespace) -> int:
    """Open the dashboard of RUN."""
    run_dir = resolve(args.run)
    from yolotui.tui.app import run_app

    return run_app(run_dir, theme=args.theme)
