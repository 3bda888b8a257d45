"""`yolotui attach RUN [--theme NAME]`: open a run's live dashboard (reattach after an SSH drop)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """RUN and --theme."""
    parser.add_argument("run", metavar="RUN", help="run folder, or the name of an indexed run")
    parser.add_argument("--theme", metavar="NAME", default=None, help="colour theme (remembered)")


def resolve(value: str) -> Path:
    """RUN as a folder: the jobs layer's resolver when present, else a folder path or a unique indexed name."""
    try:
        from yolotui.runs.resolve import resolve_run
    except ImportError:
        return _resolve_locally(value)
    return Path(resolve_run(value))


def _resolve_locally(value: str) -> Path:
    from yolotui.errors import UserError
    from yolotui.runs import index

    path = Path(value).expanduser()
    if path.is_dir():
        return path.resolve()
    matches = [entry for entry in index.entries() if entry.name == value or Path(entry.path).name == value]
    if len(matches) == 1:
        return Path(matches[0].path)
    if len(matches) > 1:
        raise UserError(f"'{value}' names {len(matches)} runs; give the folder: "
                        + ", ".join(m.path for m in matches[:3]))
    raise UserError(f"'{value}' is neither a run folder nor the name of an indexed run; see `yolotui ls`")


def run(args: argparse.Namespace) -> int:
    """Open the dashboard of RUN."""
    run_dir = resolve(args.run)
    from yolotui.tui.app import run_app

    return run_app(run_dir, theme=args.theme)
