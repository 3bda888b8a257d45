"""What every launch may add to run.yaml (train, resume, fine-tune, exec): notification URLs, the stall
watchdog's timeout, the logging configuration, the experiment trackers, the mirror target and the
preemption-notice URL.

`RunExtras.entries()` checks them (a bad logging YAML is refused with one line naming the file and the bad key,
before any folder is made or anything detaches) and returns the run.yaml entries: `notify`, `watchdog`,
`logging`, `trackers` (yolotui.runs.trackers), `mirror` (--mirror TARGET, `none` to turn settings.yaml's default
off; yolotui.mirror) and `preempt` (--preempt-url URL; yolotui.placement.preempt). settings.yaml supplies
`log_config`/`log_level` defaults. `carried_over` keeps a run's earlier entries that a resume does not give
again, so a resumed run still notifies and logs as it did (and keeps its trackers and their run ids).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yolotui.errors import UserError

CARRIED_KEYS = ("notify", "watchdog", "logging", "mirror", "preempt", "restored")  # restored: yolotui restore


@dataclass
class RunExtras:
    """`notify`: apprise URLs (--notify, repeatable); `stall_timeout_s`: the watchdog's floor (--stall-timeout);
    `log_config`: a dictConfig YAML (--log-config); `log_level`: DEBUG, INFO or WARNING (--log-level);
    `mirror`: where to mirror the run (--mirror); `preempt_url`: the metadata URL to poll (--preempt-url)."""

    notify: list[str] = field(default_factory=list)
    stall_timeout_s: float | None = None
    log_config: str | None = None
    log_level: str | None = None
    trackers: Any = None  # runs.trackers.TrackerFlags: --no-tensorboard, --mlflow [URI], --wandb PROJECT
    mirror: str | None = None
    preempt_url: str | None = None

    def entries(self) -> dict[str, Any]:
        """The run.yaml entries for what was given (validated)."""
        from yolotui import logconfig
        from yolotui.usersettings import load_user_settings

        extra: dict[str, Any] = {}
        urls = [u.strip() for u in self.notify or [] if u and u.strip()]
        if urls:
            extra["notify"] = {"urls": urls}
        if self.stall_timeout_s is not None:
            if not self.stall_timeout_s > 0:
                raise UserError(f"--stall-timeout {self.stall_timeout_s:g}: must be above 0 seconds")
            extra["watchdog"] = {"min_s": float(self.stall_timeout_s), "log_s": float(self.stall_timeout_s)}
        log_config, log_level = self.log_config, self.log_level
        if not log_config or not log_level:
            settings = load_user_settings(strict=False)
            log_config = log_config or settings.get("log_config")
            log_level = log_level or settings.get("log_level")
        if self.trackers is not None and self.trackers.given():
            extra["trackers"] = self.trackers.entry()  # a missing package is refused here, naming the extra
        entry = logconfig.entry_for(log_config, log_level)
        if entry is not None:
            extra["logging"] = entry
        extra.update(spot_entries(self.mirror, self.preempt_url))
        return extra


def spot_entries(mirror: str | None, preempt_url: str | None) -> dict[str, Any]:
    """run.yaml's `mirror` and `preempt` for --mirror and --preempt-url (checked: one line when unusable); a
    malformed settings.yaml `mirror` is refused here too, before anything detaches."""
    from yolotui.mirror.settings import OFF_WORDS, section
    from yolotui.mirror.target import check_usable, parse_target
    from yolotui.usersettings import load_user_settings, settings_file

    extra: dict[str, Any] = {}
    if mirror is not None and mirror.strip().lower() in OFF_WORDS:
        extra["mirror"] = {"enabled": False}
    elif mirror is not None:
        target = parse_target(mirror)
        check_usable(target)
        extra["mirror"] = {"target": target.location}
    else:
        default = section(load_user_settings(strict=False).get("mirror"), str(settings_file()))
        if default.get("target") and default.get("enabled") is not False:
            check_usable(parse_target(str(default["target"])))
    if preempt_url:
        from yolotui.placement.preempt import check_url

        extra["preempt"] = {"url": check_url(preempt_url)}
    return extra


def carried_over(run_dir: Path, entries: dict[str, Any]) -> dict[str, Any]:
    """`entries` plus the run's previous run.yaml entries (CARRIED_KEYS: notify, watchdog, logging, mirror ...)
    not given again."""
    from yolotui.runs.runconfig import read_run_config, run_yaml_path
    from yolotui.runs.trackers import carried_entries

    if not run_yaml_path(Path(run_dir)).exists():
        return dict(entries)
    try:
        previous = read_run_config(Path(run_dir))
    except UserError:
        return dict(entries)
    return {**{k: previous[k] for k in CARRIED_KEYS if previous.get(k)}, **entries,
            **carried_entries(Path(run_dir), previous, entries)}  # trackers: merged per key, and their run ids
