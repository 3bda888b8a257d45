"""`yolotui completion bash|zsh|fish`: print a shell completion script (subcommands, flags, files, run names).

The script asks `yolotui completion --runs` for run names when a command takes RUN, so it completes the runs of
yolotui's run index as they are when you press Tab. Install it once, e.g.
`yolotui completion bash > ~/.local/share/bash-completion/completions/yolotui`.
"""

from __future__ import annotations

import argparse
import re
import sys

SHELLS = ("bash", "zsh", "fish")
# run names written for the scripts: bash's compgen and fish's -a expand what they are given, so a hostile name
# in the index (a planted `$(...)`) must never reach them
SAFE_NAME = re.compile(r"^[A-Za-z0-9._-]{1,200}$")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The shell, or --runs (what the scripts call for run names)."""
    parser.add_argument("shell", nargs="?", choices=SHELLS, help="the shell to write the script for")
    parser.add_argument("--runs", action="store_true",
                        help="print the names of the runs in yolotui's run index, one a line (the scripts call this)")


def run_names() -> list[str]:
    """Indexed run names that are safe to hand to a shell, each once, in index order."""
    from yolotui.runs import index

    seen: dict[str, None] = {}
    for entry in index.entries():
        if SAFE_NAME.match(entry.name):
            seen.setdefault(entry.name)
    return list(seen)


def run(args: argparse.Namespace) -> int:
    """Print the script for args.shell, or the run names with --runs."""
    from yolotui.errors import UserError

    if args.runs:
        for name in run_names():
            print(name)
        return 0
    if not args.shell:
        raise UserError("name a shell: yolotui completion bash, zsh or fish")
    from yolotui.commands._completion_scripts import SCRIPTS, describe

    # the whole parser comes from the CLI entry point (yolotui.cli sets it), which imports this package
    sys.stdout.write(SCRIPTS[args.shell](describe(args.full_parser())))
    return 0
