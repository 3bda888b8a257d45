"""`yolotui restore TARGET/RUN_NAME [--project DIR] [--force] [--json]`: bring a mirrored run to this machine.

The mirror (`--mirror TARGET` or settings.yaml's `mirror`) holds each run in TARGET/RUN_NAME/. Restoring fetches
it, checks every checkpoint against its manifest, puts it in PROJECT/RUN_NAME (PROJECT: --project, default
runs/train), points its records at the new folder and adds it to the run list; then `yolotui resume
PROJECT/RUN_NAME` continues it exactly. The work itself is yolotui.mirror.restore_run.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `yolotui restore`."""
    parser.add_argument("source", metavar="TARGET/RUN_NAME",
                        help="the mirrored run: its mirror target and run name, e.g. s3://bucket/runs/exp, "
                             "box:/data/mirror/exp or /mnt/mirror/exp")
    parser.add_argument("--project", default=None, metavar="DIR",
                        help="the folder that gets RUN_NAME (default runs/train)")
    parser.add_argument("--force", action="store_true",
                        help="replace the files of an existing, not running, PROJECT/RUN_NAME with the mirror's")
    parser.add_argument("--json", action="store_true", help="print the restored run as JSON")


def run(args: argparse.Namespace) -> int:
    """Restore the run and say where it is and how to resume it."""
    import json
    import shlex
    import sys

    from yolotui import formatting
    from yolotui.mirror.restore_run import RestoreRequest, restore

    result = restore(RestoreRequest(args.source, args.project, args.force))
    if args.json:
        print(json.dumps(result.to_json()))
    out = sys.stderr if args.json else sys.stdout
    where = (f"after {formatting.epochs_done(result.epoch, result.epochs, result.step or 0)}"
             if result.epoch is not None else "with no checkpoint yet")
    print(f"restored {result.name} from {result.source} into {result.run_dir} ({result.state}, {where}; "
          "every checkpoint matches its manifest)", file=out)
    for note in result.notes:
        print(f"  {note}", file=out)
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"resume it with: yolotui resume {shlex.quote(str(result.run_dir))}", file=out)
    return 0
