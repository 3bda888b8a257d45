"""`yolotui attach RUN [--theme NAME] [--wizard resume|finetune]`: open a run's live dashboard (reattach after an
SSH drop), or its resume or fine-tune wizard alone (a launch opens the new run's dashboard, a cancel quits).

`yolotui attach HOST:RUN` opens the dashboard (or wizard) of a run on a configured host: `ssh -t HOST yolotui
attach RUN` in this terminal (the remote screen, streamed; nothing is copied). Quitting it never stops the run.
The home screen opens a remote row's wizards this way: they run on the host, next to its checkpoints."""

from __future__ import annotations

import argparse
from pathlib import Path

# autowrap on, alternate screen left, cursor shown, mouse reports and bracketed paste off, plain colours
WIZARDS = ("resume", "finetune")
RESET_TERMINAL = "\x1b[?7h\x1b[?1049l\x1b[?25h\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?2004l\x1b[0m"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """RUN and --theme."""
    parser.add_argument("run", metavar="RUN", help="run folder, or the name of an indexed run, or HOST:RUN")
    parser.add_argument("--theme", metavar="NAME", default=None, help="colour theme (remembered)")
    parser.add_argument("--wizard", choices=WIZARDS, default=None,
                        help="open the run's resume or fine-tune wizard alone instead of its dashboard")


def resolve(value: str) -> Path:
    """RUN as a folder: a run folder path, or the name of an indexed run."""
    from yolotui.runs.resolve import resolve_run

    return Path(resolve_run(value))


def run(args: argparse.Namespace) -> int:
    """Open the dashboard of RUN (here, or on its host)."""
    from yolotui.fleet.hosts import split_remote

    host, name = split_remote(args.run)
    if host is not None:
        return _attach_remote(host, name, args.theme, args.wizard)
    run_dir = resolve(args.run)
    from yolotui.tui.app import run_app

    return run_app(run_dir, theme=args.theme, wizard=args.wizard)


def _attach_remote(host, name: str, theme: str | None, wizard: str | None = None) -> int:
    """The remote dashboard in this terminal over `ssh -t` (ServerAlive probes end it when the link dies)."""
    import subprocess
    import sys

    from yolotui.fleet.ssh import attach_argv, ssh_argv

    code = subprocess.call(ssh_argv(host, attach_argv(name, theme, wizard), tty=True))
    if code != 0 and sys.stdout.isatty():
        sys.stdout.write(RESET_TERMINAL)  # a dashboard cut off mid-frame leaves its modes on: turn them off
        sys.stdout.flush()
    if code == 255:
        print(f"yolotui: error: {host.name} ({host.target}): the ssh link failed or dropped; the run goes on "
              f"there: attach again with `yolotui attach {host.name}:{name}`", file=sys.stderr)
    return code
