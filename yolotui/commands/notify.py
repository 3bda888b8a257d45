"""`yolotui notify test [RUN] [--notify URL ...]`: send a test message to every configured notification target.

The targets are settings.yaml's `notify` (urls, command), plus RUN's own (run.yaml) when a run is named, plus
any --notify URL given here. Sent in this process, so the answer says which target failed and why.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `yolotui notify`."""
    parser.add_argument("action", choices=("test",), help="test: send a test message to every target")
    parser.add_argument("run", nargs="?", default=None, metavar="RUN", help="also the targets of this run")
    parser.add_argument("--notify", action="append", default=None, metavar="URL", help="also this apprise URL")


def run(args: argparse.Namespace) -> int:
    """Send the test message; exit 1 when a target failed, with one line per failure."""
    import socket

    from yolotui.errors import UserError
    from yolotui.runs.notify import make_event, targets_for
    from yolotui.runs.notify_send import send_all
    from yolotui.runs.usersettings import load_user_settings, settings_file

    run_config: dict = {}
    name, run_dir = "test", ""
    if args.run:
        from yolotui.runs.resolve import resolve_run
        from yolotui.runs.runconfig import read_run_config

        path = resolve_run(args.run)
        run_config, name, run_dir = read_run_config(path), path.name, str(path)
    extra = [u for u in args.notify or [] if u.strip()]
    if extra:
        run_config = {**run_config, "notify": {**(run_config.get("notify") or {}),
                                               "urls": [*((run_config.get("notify") or {}).get("urls") or []),
                                                        *extra]}}
    targets = targets_for(run_config, load_user_settings(strict=True))
    if not targets:
        raise UserError(f"no notification targets: add notify.urls or notify.command to {settings_file()}, "
                        "or give --notify URL", exit_code=1)
    event = make_event("test", name, run_dir, f"yolotui test notification from {socket.gethostname()}")
    errors = send_all(event, targets.to_dict())
    count = len(targets.urls) + (1 if targets.command else 0)
    for error in errors:
        print(f"failed: {error}")
    print(f"sent to {count - len(errors)} of {count} target(s)")
    return 1 if errors else 0
