"""`yolotui doctor RUN|PATH [--json] [--deep]`: diagnose a run or a checkpoint before resuming (yolotui.jobs.doctor).

RUN is a run directory or a run name from the index; PATH a checkpoint file. Exit status: 0 when the
run can go on as it is (resume, extend, or live), 1 when it needs attention (damaged, incomplete,
foreign or missing checkpoint), 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The doctor's flags."""
    parser.add_argument("target", metavar="RUN|PATH", help="run directory, run name, or checkpoint file")
    parser.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    parser.add_argument("--deep", action="store_true",
                        help="also load the checkpoint with torch.load(weights_only=True) in a subprocess")
    parser.add_argument("--no-env", action="store_true", help="skip the torch environment probe")


def run(args: argparse.Namespace) -> int:
    """Diagnose and print; exit 0 when healthy, 1 when the run or checkpoint needs attention."""
    from yolotui.jobs.doctor import DoctorRequest, doctor

    result = doctor(DoctorRequest(args.target, deep=args.deep, environment=not args.no_env))
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        sys.stdout.write(result.text())
    return 0 if result.healthy else 1
