"""How long a graceful stop waits before SIGKILL: never less than the run's own step and checkpoint times.

A fixed 30 s grace lost work on a loaded machine where one step took longer. The grace
used is the larger of the one asked for and what the run has shown it needs: the time to finish the step
under way plus write a checkpoint, from the attempt's `batch` events (seconds per step) and `checkpoint`
events (seconds to write), with a safety factor. And a checkpoint that is being written (its temporary file
in weights/ still growing) is never interrupted by SIGKILL, whatever the grace says.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

from yolotui.runs.eventlog import recent_events
from yolotui.runs.layout import WEIGHTS_DIR

STEP_FACTOR = 3.0  # the step under way, plus slack for a loaded machine
CKPT_FACTOR = 2.0
MARGIN_S = 5.0
WRITE_QUIET_S = 10.0  # a temporary checkpoint file untouched this long is not being written any more


def measured_times(run_dir: Path, attempt: int | None = None) -> tuple[float, float]:
    """(longest seconds per step, longest checkpoint write) seen in the attempt's recent events; 0 if unknown."""
    events = recent_events(run_dir, max_bytes=256 * 1024)
    if attempt is not None:
        events = [e for e in events if e.get("attempt", attempt) == attempt]
    step_s = ckpt_s = 0.0
    previous: tuple[float, float] | None = None  # (ts, global step) of the previous batch event
    for event in events:
        kind = event.get("type")
        if kind == "checkpoint":
            seconds = _number(event.get("seconds"))
            if seconds is not None:
                ckpt_s = max(ckpt_s, seconds)
        elif kind == "batch":
            ts, epoch, batch, batches = (_number(event.get(k)) for k in ("ts", "epoch", "batch", "batches"))
            if None in (ts, epoch, batch):
                continue
            step = epoch * (batches or 1e9) + batch  # type: ignore[operator]
            if previous is not None and step > previous[1]:
                step_s = max(step_s, (ts - previous[0]) / (step - previous[1]))  # type: ignore[operator]
            previous = (ts, step)  # type: ignore[assignment]
        elif kind == "start":
            previous = None
    return step_s, ckpt_s


def effective_grace(requested_s: float, run_dir: Path, attempt: int | None = None) -> tuple[float, str]:
    """(grace to use, why) — the requested grace, raised to what the run's measured times need."""
    step_s, ckpt_s = measured_times(run_dir, attempt)
    need = STEP_FACTOR * step_s + CKPT_FACTOR * ckpt_s + MARGIN_S if (step_s or ckpt_s) else 0.0
    if need > requested_s:
        return need, (f"raised from {requested_s:g} s: steps take up to {step_s:.1f} s and checkpoints "
                      f"{ckpt_s:.1f} s to write")
    return requested_s, "as requested"


def checkpoint_being_written(run_dir: Path, now: float | None = None) -> Path | None:
    """A temporary checkpoint file in weights/ that is still being written (touched recently), if any."""
    folder = Path(run_dir) / WEIGHTS_DIR
    now = time.time() if now is None else now
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    for name in names:
        if name.startswith(".") and name.endswith(".tmp"):
            try:
                mtime = os.stat(folder / name).st_mtime
            except OSError:
                continue
            if now - mtime < WRITE_QUIET_S:
                return folder / name
    return None


def _number(value: object) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None
