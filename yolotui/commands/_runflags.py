"""Flags every launching command shares (train, resume, finetune, exec): notifications, stall watchdog, logging.

`add_run_flags(parser)` registers --notify URL (repeatable), --stall-timeout S, --log-config FILE and
--log-level LEVEL; `run_extra(args)` checks them (a bad logging YAML is refused here, before anything
detaches) and returns the run.yaml entries they make: `notify`, `watchdog`, `logging`.
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


def run_extra(args: argparse.Namespace) -> dict[str, Any]:
    """The run.yaml entries for the shared flags given (validated); settings.yaml supplies log defaults."""
    from yolotui.errors import UserError
    from yolotui.runs import logconfig
    from yolotui.runs.usersettings import load_user_settings

    extra: dict[str, Any] = {}
    urls = [u.strip() for u in getattr(args, "notify", None) or [] if u.strip()]
    if urls:
        extra["notify"] = {"urls": urls}
    stall = getattr(args, "stall_timeout", None)
    if stall is not None:
        if stall <= 0:
            raise UserError(f"--stall-timeout {stall:g}: must be above 0 seconds")
        extra["watchdog"] = {"min_s": float(stall), "log_s": float(stall)}
    log_config, log_level = getattr(args, "log_config", None), getattr(args, "log_level", None)
    if not log_config or not log_level:
        settings = load_user_settings(strict=False)
        log_config = log_config or settings.get("log_config")
        log_level = log_level or settings.get("log_level")
    entry = logconfig.entry_for(log_config, log_level)
    if entry is not None:
        extra["logging"] = entry
    return extra


CARRIED_KEYS = ("notify", "watchdog", "logging")


def carried_over(run_dir: Any, extra: dict[str, Any]) -> dict[str, Any]:
    """`extra` plus the shared entries of the run's previous run.yaml that are not given again (on resume)."""
    from pathlib import Path

    from yolotui.errors import UserError
    from yolotui.runs.runconfig import read_run_config, run_yaml_path

    if not run_yaml_path(Path(run_dir)).exists():
        return extra
    try:
        previous = read_run_config(Path(run_dir))
    except UserError:
        return extra
    return {**{k: previous[k] for k in CARRIED_KEYS if previous.get(k)}, **extra}
