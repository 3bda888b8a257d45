"""Why is it slow: the verdict the dashboard and `yolotui doctor` give, from what the run shows. Torch-free.

Two sources, either may be missing:

- the yolotui engine's epoch events carry `loop` (yolotui/engine/train/loop_timing.py): seconds the loop waited for
  the data loader against seconds it computed. Waiting DATA_BOUND_PCT % of the step or more is
  "data-bound: the GPU waited 62 % of the step for data; try --workers 16 / --cache ram";
- the supervisor's GPU summary (yolotui/telemetry/gpu_summary.py), for every backend: throttled for
  THROTTLED_PCT % of the last epoch (or of the attempt, for commands that write no epochs) with the clock below
  the summary's THROTTLE_CLOCK_PCT is "GPU throttled 40 % of the epoch (thermal)"; for a command without loop
  timings (exec, official, ultralytics), a mean utilisation under LOW_UTIL_PCT % over a few minutes says the GPU
  sits idle much of the time.

When the loop timings are known and nothing holds, the verdict is `ok` ("not data-bound: the loop waited 3 %
of the step for data").
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

from yolotui.telemetry.gpu_summary import THROTTLE_CLOCK_PCT

DATA_BOUND_PCT = 30.0
THROTTLED_PCT = 20.0
LOW_UTIL_PCT = 50.0
LOW_UTIL_MIN_S = 120.0  # utilisation says little about a run younger than this
DATA_BOUND = "data-bound"
THROTTLED = "throttled"
LOW_UTILISATION = "low-utilisation"
OK = "ok"


@dataclass
class Verdict:
    """One finding: its kind (data-bound, throttled, low-utilisation, ok), the sentence, and the share (%)."""

    kind: str
    text: str
    pct: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form."""
        return asdict(self)


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def data_wait_pct(loop: Any) -> float | None:
    """The share of the loop's time spent waiting for data (%), from an epoch event's `loop`; None if unknown."""
    if not isinstance(loop, dict):
        return None
    wait, compute = _num(loop.get("data_wait_s")), _num(loop.get("compute_s"))
    if wait is None or compute is None or wait < 0 or compute < 0 or wait + compute <= 0:
        return None
    return 100.0 * wait / (wait + compute)


def data_advice(loop: dict[str, Any], cpus: int | None = None) -> str:
    """What to try against a data-bound loop: more workers (up to the CPUs), the RAM cache, else lighter work."""
    cpus = cpus or os.cpu_count() or 1
    workers = _num(loop.get("workers"))
    tries = []
    if workers is None or workers < cpus:
        more = cpus if workers is None else int(min(cpus, max(workers * 2, workers + 2)))
        tries.append(f"--workers {more}")
    if loop.get("cache") != "ram":
        tries.append("--cache ram")
    if not tries:
        return "the loader already uses every CPU and the RAM cache: try faster storage, a smaller --img or " \
               "lighter augmentation"
    return "try " + " / ".join(tries)


def verdicts(loop: Any = None, summary: Any = None, cpus: int | None = None) -> list[Verdict]:
    """The findings, the most telling first; [] when nothing was measured."""
    found: list[Verdict] = []
    pct = data_wait_pct(loop)
    if pct is not None:
        pct = round(pct, 1)  # the text and Verdict.pct say the same number
        if pct >= DATA_BOUND_PCT:
            found.append(Verdict(DATA_BOUND, f"data-bound: the GPU waited {pct:.0f} % of the step for data; "
                                             f"{data_advice(loop, cpus)}", pct))
    if isinstance(summary, dict) and summary.get("samples"):
        epoch = summary.get("last_epoch") if isinstance(summary.get("last_epoch"), dict) else None
        share = _num((epoch or {}).get("throttled_pct"))
        span = "the epoch" if share is not None else "the run"
        if share is None:
            share = _num(summary.get("throttled_pct"))
        share = None if share is None else round(share, 1)
        clock = _num(summary.get("throttled_clock_pct"))
        if share is not None and share >= THROTTLED_PCT and (clock is None or clock < THROTTLE_CLOCK_PCT):
            reasons = summary.get("throttle_reasons_s") if isinstance(summary.get("throttle_reasons_s"), dict) else {}
            named = sorted((k for k in reasons if _num(reasons[k])), key=lambda k: -float(reasons[k]))
            text = f"GPU throttled {share:.0f} % of {span}" + (f" ({', '.join(named)})" if named else "")
            if clock is not None:
                text += f", SM clock at {clock:.0f} %"
            found.append(Verdict(THROTTLED, text, share))
        util, seconds = _num(summary.get("utilization_mean_pct")), _num(summary.get("seconds"))
        util = None if util is None else round(util, 1)
        if pct is None and util is not None and seconds and seconds >= LOW_UTIL_MIN_S and util < LOW_UTIL_PCT:
            found.append(Verdict(LOW_UTILISATION, f"the GPU was busy only {util:.0f} % of the time: the run is "
                                                  "likely data- or CPU-bound (more data-loader workers, a RAM "
                                                  "cache)", util))
    if not found and pct is not None:
        found.append(Verdict(OK, f"not data-bound: the loop waited {pct:.0f} % of the step for data", pct))
    return found


def last_loop(events: Any) -> dict[str, Any] | None:
    """The `loop` of the newest epoch event in `events` (None when none has one)."""
    for event in reversed(list(events or [])):
        if isinstance(event, dict) and event.get("type") == "epoch" and isinstance(event.get("loop"), dict):
            return event["loop"]
    return None
