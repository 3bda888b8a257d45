"""Flags every launching command shares (train, resume, finetune, exec): notifications, stall watchdog, logging,
the mirror and the preemption notice.

`add_run_flags(parser)` registers --notify URL (repeatable), --stall-timeout S, --log-config FILE,
--log-level LEVEL, --mirror TARGET and --preempt-url URL; `extras_from(args)` turns them into a jobs.runextras.RunExtras for the job request.
"""

from __future__ import annotations

import argparse
from typing import Any


def add_run_flags(parser: argparse.ArgumentParser) -> None:
    """Register the shared flags."""
    parser.add_argument("--notify", action="append", default=None, metavar="URL",
                        help="apprise URL to notify when the run finishes, fails, restarts or stalls "
                             "(repeatable; added to settings.yaml's notify.urls)")
    parser.add_argument("--stall-timeout", type=float, default=None, metavar="S",
                        help="seconds without progress before the stall watchdog restarts the trainer "
                             "(default max(600, 20x the median step); for exec: no log output for S seconds)")
    parser.add_argument("--log-config", default=None, metavar="FILE",
                        help="logging.config.dictConfig YAML for the supervisor and the trainer "
                             "(default: settings.yaml's log_config)")
    parser.add_argument("--log-level", default=None, choices=("DEBUG", "INFO", "WARNING"), type=str.upper,
                        help="level of train.log and supervisor.log (default INFO)")
    parser.add_argument("--mirror", default=None, metavar="TARGET",
                        help="copy the run to TARGET/NAME after every checkpoint and at the end: a folder, host:path "
                             "(rsync over ssh) or a URL (s3://, gs://, az://, file://); none: no mirror "
                             "(default: settings.yaml's mirror)")
    parser.add_argument("--preempt-url", default=None, metavar="URL",
                        help="poll the machine's metadata URL for a preemption notice; on one, checkpoint, mirror "
                             "and end the run `interrupted` (class preempted)")


def extras_from(args: argparse.Namespace) -> Any:
    """The shared flags given, as a RunExtras for a job request."""
    from yolotui.commands._trackerflags import tracker_flags
    from yolotui.jobs.runextras import RunExtras

    return RunExtras(notify=list(getattr(args, "notify", None) or []),
                     stall_timeout_s=getattr(args, "stall_timeout", None),
                     log_config=getattr(args, "log_config", None), log_level=getattr(args, "log_level", None),
                     trackers=tracker_flags(args),
                     mirror=getattr(args, "mirror", None), preempt_url=getattr(args, "preempt_url", None))
