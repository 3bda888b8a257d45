"""A run's mirror settings: the target (run.yaml's `mirror`, from --mirror, else settings.yaml's) and the knobs.

settings.yaml takes `mirror: s3://bucket/runs` or a mapping:

    mirror:
      target: s3://bucket/runs   # the default for every run that gives no --mirror
      tries: 3                   # attempts of one copy, `backoff_s` apart (doubling)
      backoff_s: 5
      retry_s: 60                # after a failed copy, the next one even without a new checkpoint
      slow_s: 600                # a copy running this long is reported slow (status, dashboard, notification)
      timeout_s: 1800            # ... and this long is ended and counted as failed
      flush_s: 90                # at the run's end (a stop, a preemption) the last copy waits this long at most

run.yaml's `mirror` (written by --mirror) has the same keys; its values win. `enabled: false` in run.yaml turns
the settings.yaml default off for that run (--mirror none).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from yolotui.errors import UserError

OFF_WORDS = frozenset({"none", "off", "no", "false"})


@dataclass
class MirrorSettings:
    """Where and how a run is mirrored (see the module docstring)."""

    target: str
    tries: int = 3
    backoff_s: float = 5.0
    retry_s: float = 60.0
    slow_s: float = 600.0
    timeout_s: float = 1800.0
    flush_s: float = 90.0


def section(value: Any, where: str) -> dict[str, Any]:
    """A `mirror` entry as a mapping ({} when absent); UserError naming `where` when it has the wrong shape."""
    if value is None:
        return {}
    if isinstance(value, str):
        return {"enabled": False} if value.strip().lower() in OFF_WORDS else {"target": value}
    if isinstance(value, bool):
        return {"enabled": value}
    if not isinstance(value, dict):
        raise UserError(f"{where}: 'mirror' must be a target (a folder, host:path or URL) or a mapping "
                        "(target, tries, retry_s, slow_s, timeout_s, flush_s)")
    target = value.get("target")
    if target is not None and not isinstance(target, str):
        raise UserError(f"{where}: mirror.target must be text: a folder, host:path or a URL")
    for f in fields(MirrorSettings):
        if f.name == "target" or f.name not in value:
            continue
        number = value[f.name]
        if isinstance(number, bool) or not isinstance(number, (int, float)) or not math.isfinite(number) \
                or number < (1 if f.name == "tries" else 0):
            raise UserError(f"{where}: mirror.{f.name} must be a number of {'tries' if f.name == 'tries' else 'seconds'}"
                            f" ({'1' if f.name == 'tries' else '0'} or more)")
    return dict(value)


def resolve(run_entry: Any, settings_entry: Any, run_where: str = "run.yaml",
            settings_where: str = "settings.yaml") -> MirrorSettings | None:
    """The run's mirror settings, or None when it is not mirrored; UserError for a malformed entry."""
    own, user = section(run_entry, run_where), section(settings_entry, settings_where)
    if own.get("enabled") is False:
        return None
    merged = {**{k: v for k, v in user.items() if k != "enabled"}, **{k: v for k, v in own.items() if k != "enabled"}}
    if not merged.get("target") or user.get("enabled") is False and not own.get("target"):
        return None
    kwargs = {f.name: (int(merged[f.name]) if f.name == "tries" else merged[f.name])
              for f in fields(MirrorSettings) if f.name in merged}
    return MirrorSettings(**kwargs)
