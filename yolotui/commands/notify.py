"""`yolotui notify test [RUN] [--notify URL ...] [--json]`: send a test message to every notification target.

The targets are settings.yaml's `notify` (urls, command), plus RUN's own (run.yaml) when a run is named, plus
any --notify URL given here (yolotui.notify.trial). Sent in this process, so the answer says which
target failed and why; exit code 1 when one did.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `yolotui notify`."""
    parser.add_argument("action", choices=("test",), help="test: send a test message to every target")
    parser.add_argument("run", nargs="?", default=None, metavar="RUN", help="also the targets of this run")
    parser.add_argument("--notify", action="append", default=None, metavar="URL", help="also this apprise URL")
    parser.add_argument("--json", action="store_true", help="print targets, sent and errors as JSON")


def run(args: argparse.Namespace) -> int:
    """Send the test message; one line per failed target."""
    import json

    from yolotui.notify.trial import notify_test

    result = notify_test(args.run, args.notify)
    if args.json:
        print(json.dumps(result.to_json()))
    else:
        print("targets: " + ", ".join(result.labels))  # scheme and a short hash each: no token on the screen
        for error in result.errors:
            print(f"failed: {error}")
        print(f"sent to {result.sent} of {result.targets} target(s)")
    return 1 if result.errors else 0
