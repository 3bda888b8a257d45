"""`yolotui save RUN`: ask a running trainer to write a checkpoint now (SIGUSR1) and go on training."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `yolotui save`."""
    parser.add_argument("run", metavar="RUN", help="run name (see `yolotui ls`) or run folder")


def run(args: argparse.Namespace) -> int:
    """Send the save signal."""
    from yolotui.jobs.control import save

    print(save(args.run).message)
    return 0
