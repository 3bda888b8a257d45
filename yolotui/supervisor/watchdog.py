"""The stall watchdog: a trainer that makes no progress is a failure of class `hang`.

Progress is a new event in events.jsonl (batch, epoch, checkpoint ...) for the yolotui engine, and growth of
train.log for commands that write no events (`exec`, the official train_dual.py). The trainer is stalled when
there was none for

- max(`min_s`, `factor` x the median step time) once batches run (default max(10 min, 20 x median step));
- `setup_s` before the attempt's first event (loading and caching data; default 30 min, at least `min_s`),
  after an epoch's last batch (validation writes no events) and after the attempt's last event (`done`,
  `stop` or `error`: the process is exiting);
- `log_s` for commands without events (default 30 min).

A trainer stopped with SIGSTOP writes nothing, so it is caught the same way. When stalled the supervisor
records what is known (`facts`: the last event, GPU utilisation, the trainer's state from /proc), asks for a
checkpoint (SIGUSR1, where the command handles it) and waits `checkpoint_wait_s`, then SIGTERM, and SIGKILL
after `term_grace_s`; the attempt ends as `hang`, resumed from last.pt and counted against the restarts. If
progress comes back while it waits, the watchdog stands down.

Settings: run.yaml `watchdog` (from `--stall-timeout`), else settings.yaml `watchdog`, keys as above plus
`enabled`.
"""

from __future__ import annotations

import signal
import statistics
import time
from collections import deque
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from yolotui.runs.eventlog import RunFollower

FINAL_EVENTS = frozenset({"done", "stop", "error"})  # after these the trainer is on its way out


@dataclass
class WatchdogSettings:
    """Thresholds of the stall watchdog, in seconds (see the module docstring)."""

    enabled: bool = True
    min_s: float = 600.0
    factor: float = 20.0
    setup_s: float = 1800.0
    log_s: float = 1800.0
    checkpoint_wait_s: float = 30.0
    term_grace_s: float = 30.0

    @classmethod
    def from_configs(cls, run_config: dict[str, Any], settings: dict[str, Any] | None = None) -> WatchdogSettings:
        """Defaults, then settings.yaml's `watchdog`, then run.yaml's (unknown or bad values are ignored)."""
        values = asdict(cls())
        for source in ((settings or {}).get("watchdog"), run_config.get("watchdog")):
            if not isinstance(source, dict):
                continue
            for f in fields(cls):
                if f.name in source:
                    try:
                        values[f.name] = bool(source[f.name]) if f.name == "enabled" else float(source[f.name])
                    except (TypeError, ValueError):
                        pass
        return cls(**values)


def step_times(batches: list[dict[str, Any]]) -> list[float]:
    """Seconds per batch between consecutive batch events of one epoch."""
    times = []
    for before, after in zip(batches, batches[1:]):
        steps = int(after.get("batch", 0)) - int(before.get("batch", 0))
        if after.get("epoch") == before.get("epoch") and steps > 0:
            times.append((float(after["ts"]) - float(before["ts"])) / steps)
    return times


def trainer_state(pid: int | None) -> dict[str, Any]:
    """The trainer's state letter and its meaning, and the kernel function it waits in, from /proc."""
    names = {"R": "running", "S": "sleeping", "D": "uninterruptible wait (I/O or driver)", "T": "stopped (SIGSTOP)",
             "t": "stopped by a tracer", "Z": "zombie", "X": "dead", "I": "idle"}
    if not pid:
        return {}
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return {"state": "gone"}
    letter = stat[stat.rfind(")") + 2:].split()[0]
    facts: dict[str, Any] = {"state": letter, "meaning": names.get(letter, "?")}
    try:
        facts["wchan"] = Path(f"/proc/{pid}/wchan").read_text().strip() or None
    except OSError:
        pass
    return facts


def gpu_utilisation() -> list[float | None] | None:
    """Utilisation (%) of each GPU now, or None where NVML is unavailable."""
    try:
        from yolotui.telemetry.gpu import GpuSampler
    except ImportError:
        return None
    try:
        sampler = GpuSampler()
        snapshot = sampler.sample()
        sampler.close()
        return [g.utilization_pct for g in snapshot.gpus] or None
    except Exception:  # noqa: BLE001 - a telemetry problem must never break supervision
        return None


class StallWatch:
    """Follows one attempt's progress and escalates when it stops; see the module docstring."""

    def __init__(self, settings: WatchdogSettings, events_path: Path, events_offset: int, log_path: Path,
                 log_offset: int, uses_events: bool, save_signal: bool) -> None:
        self.settings = settings
        # both streams, from where this attempt begins (the batch stream from its end now)
        self.follower = RunFollower(Path(events_path).parent, offset=events_offset, batch_tail=0)
        self.log_path = Path(log_path)
        self.log_size = log_offset
        self.uses_events = uses_events
        self.save_signal = save_signal
        self.started = time.time()
        self.last_progress = self.started
        self.seen_event = False
        self.last_event: dict[str, Any] | None = None
        self.kept: list[dict[str, Any]] = []  # every event but batches, for the policy
        self.recent_batches: deque[dict[str, Any]] = deque(maxlen=64)
        self.stage: str | None = None  # None, "checkpoint", "term", "kill"
        self.stage_since = 0.0
        self.facts: dict[str, Any] | None = None

    def poll(self) -> list[dict[str, Any]]:
        """Read new events (and train.log's size); returns the new events."""
        events = self.follower.poll()
        now = time.time()
        for event in events:
            self.seen_event = True
            self.last_progress = now
            self.last_event = event
            if event.get("type") == "batch":
                self.recent_batches.append(event)
            else:
                self.kept.append(event)
        if not self.uses_events:
            try:
                size = self.log_path.stat().st_size
            except OSError:
                size = self.log_size
            if size != self.log_size:
                self.log_size, self.last_progress = size, now
        if events and self.stage is not None:
            self.stage = None  # progress came back: stand down
        return events

    def median_step_s(self) -> float | None:
        """The median seconds per batch seen so far in this attempt."""
        times = step_times(list(self.recent_batches))
        return statistics.median(times) if times else None

    def limit_s(self) -> float:
        """Seconds without progress that count as a stall now."""
        s = self.settings
        if not self.uses_events:
            return s.log_s
        if self.last_event is not None and self.last_event.get("type") in FINAL_EVENTS:
            return max(s.min_s, s.setup_s)  # the trainer is exiting: tearing down may take a while
        if not self.recent_batches:
            return max(s.min_s, s.setup_s) if not self.seen_event or self.last_event.get("type") == "start" \
                else s.min_s
        median = self.median_step_s()
        limit = max(s.min_s, s.factor * median) if median else s.min_s
        last = self.last_event or {}
        if last.get("type") == "batch" and int(last.get("batch") or 0) >= int(last.get("batches") or 1 << 30):
            limit = max(limit, s.setup_s)  # the epoch's batches are done: validation writes no events
        return limit

    def step(self, pid: int | None) -> int | None:
        """Advance the watchdog; the signal to send to the trainer now, if any."""
        if not self.settings.enabled:
            return None
        now = time.time()
        if self.stage is None:
            idle = now - self.last_progress
            if idle < self.limit_s():
                return None
            self.facts = self.describe(pid, idle)
            self.stage, self.stage_since = "checkpoint", now
            if self.save_signal:
                return signal.SIGUSR1
            self.stage_since = now - self.settings.checkpoint_wait_s  # nothing to wait for
            return None
        if self.stage == "checkpoint" and now - self.stage_since >= self.settings.checkpoint_wait_s:
            self.stage, self.stage_since = "term", now
            return signal.SIGTERM
        if self.stage == "term" and now - self.stage_since >= self.settings.term_grace_s:
            self.stage, self.stage_since = "kill", now
            return signal.SIGKILL
        return None

    @property
    def fired(self) -> bool:
        """True once the watchdog has declared this attempt stalled (and not stood down)."""
        return self.stage is not None

    def describe(self, pid: int | None, idle: float) -> dict[str, Any]:
        """What is known about the stall: seconds idle, the limit, the last event, GPU use, /proc state."""
        last = self.last_event or {}
        if last.get("type") == "batch":
            what = f"batch {last.get('batch')}/{last.get('batches')} of epoch {int(last.get('epoch', 0)) + 1}"
        else:
            what = last.get("type") or ("train.log output" if not self.uses_events else "none yet")
        return {"idle_s": round(idle, 1), "limit_s": round(self.limit_s(), 1), "last_event": what,
                "last_event_ts": last.get("ts"), "median_step_s": self.median_step_s(),
                "gpu_util_pct": gpu_utilisation(), "trainer": trainer_state(pid)}

    def message(self) -> str:
        """The stall in one line, for status, the notification and the remedy."""
        f = self.facts or {}
        trainer = f.get("trainer") or {}
        state = f"; trainer state {trainer.get('state')} ({trainer.get('meaning')})" if trainer.get("state") else ""
        gpu = f"; GPU utilisation {f['gpu_util_pct']}%" if f.get("gpu_util_pct") else ""
        return (f"no progress for {f.get('idle_s', 0):g} s (limit {f.get('limit_s', 0):g} s); last event: "
                f"{f.get('last_event')}{state}{gpu}")
