"""Options several commands share, spelled one way everywhere, and how a started run is reported.

`--batch-size` and `--imgsz` are the names shown in help; `--batch` and `--img`/`--img-size` (the official
README's spellings) are accepted everywhere as hidden aliases. `--json` on commands that start a run prints
`{"name", "folder", "state", "verb", "warnings"}` on stdout and nothing else there.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

BATCH_FLAGS = ("--batch-size", "--batch")
IMGSZ_FLAGS = ("--imgsz", "--img", "--img-size")


def add_aliased(parser: argparse.ArgumentParser | Any, flags: tuple[str, ...], **kwargs: Any) -> None:
    """Register flags[0] with its help, and each other spelling as a hidden alias with the same dest."""
    parser.add_argument(flags[0], **kwargs)
    alias = {k: v for k, v in kwargs.items() if k in ("dest", "type", "action", "nargs", "const", "choices",
                                                      "metavar")}
    alias.setdefault("dest", flags[0].lstrip("-").replace("-", "_"))
    for flag in flags[1:]:
        parser.add_argument(flag, **alias, default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def add_batch(parser: argparse.ArgumentParser | Any, help: str, default: Any = None, **kwargs: Any) -> None:
    """--batch-size (also --batch) under dest batch_size."""
    add_aliased(parser, BATCH_FLAGS, dest="batch_size", type=int, default=default, metavar="B", help=help, **kwargs)


def add_imgsz(parser: argparse.ArgumentParser | Any, help: str, default: Any = None, dest: str = "imgsz",
              **kwargs: Any) -> None:
    """--imgsz (also --img, --img-size) under dest `dest`."""
    add_aliased(parser, IMGSZ_FLAGS, dest=dest, type=int, default=default, metavar="PX", help=help, **kwargs)


def add_json(parser: argparse.ArgumentParser | Any) -> None:
    """--json: print the started run as one JSON object (for scripts and the TUI)."""
    parser.add_argument("--json", action="store_true",
                        help="print the run's name, folder and state as JSON on stdout (human text goes to stderr)")


def report_started(result: Any, as_json: bool) -> None:
    """Print a jobs.results.StartedRun: warnings and notes, then (with --json) the JSON object on stdout."""
    human = sys.stderr if as_json else sys.stdout
    for warning in result.warnings:
        print(f"warning: {warning}", file=human)
    for note in result.notes:
        print(note, file=human)
    if as_json:
        print(json.dumps(result.to_json()), flush=True)
