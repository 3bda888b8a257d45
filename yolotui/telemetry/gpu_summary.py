"""A run attempt's GPU summary, accumulated from low-rate samples: what the GPU cost the run.

`GpuSummary.add(snapshot)` takes one snapshot (GpuSnapshot.to_dict(), plus `xids`: the Xid events seen since
the previous one) and keeps, over the run's GPUs:

- time sampled and time throttled (a slowdown reason set while the GPU is busy), per reason group, and the
  mean SM clock % while throttled; the lowest SM clock % while busy; the highest temperature and the
  slowdown threshold; mean utilisation;
- ECC errors that appeared during the attempt (counts over the first reading's; a counter reset starts anew);
- energy used (the board's energy counter, else power x time, marked estimated);
- Xid events and GPUs that fell off the bus; the PCIe links below their maximum width;
- the throttled share of the last finished epoch (`mark_epoch`, called at each epoch event).

`add` returns the news that deserve a notification, each once an attempt: `throttle` (throttling held over two
samples with the clock below THROTTLE_CLOCK_PCT), `ecc` (new uncorrected errors), `xid`, `lost`.
The run's GPUs are those its processes use; until they show, those its device names; else all GPUs.
`to_dict()` is what status.json's `gpu_summary` holds; `summary_lines` says it in words. Torch-free.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from yolotui import formatting
from yolotui.telemetry import clocks, ecc, sanity

THROTTLE_CLOCK_PCT = 90.0  # throttling that keeps the SM clock at or above this is not worth a word
BUSY_UTIL_PCT = 10.0  # below this the GPU counts as idle (its clocks drop by design)
MAX_DT_FACTOR = 3.0  # a gap longer than this many intervals counts as this many (the watcher was stuck)
MAX_EVENTS = 20  # Xid / lost entries kept
NOTEWORTHY_SHARE = 0.2  # throttled for at least this share of the time: the summary says so


class GpuSummary:
    """Accumulates one attempt's GPU facts (see the module docstring)."""

    def __init__(self, attempt: int, device_gpus: Iterable[int] = (), interval_s: float = 5.0) -> None:
        self.attempt = int(attempt)
        self.device_gpus = sorted({int(g) for g in device_gpus})
        self.interval_s = max(0.01, float(interval_s))
        self.own_gpus: set[int] = set()
        self.gpus: list[int] = list(self.device_gpus)  # the run's GPUs as far as known
        self.started: float | None = None
        self.updated: float | None = None
        self.last_ts: float | None = None
        self.samples = 0
        self.seconds = 0.0
        self.observed_s = 0.0  # time with a readable run GPU
        self.throttled_s = 0.0
        self.reasons_s: dict[str, float] = {}
        self.throttled_clock_sum = 0.0
        self.throttled_clock_s = 0.0
        self.util_sum = 0.0
        self.util_s = 0.0
        self.min_clock_pct: float | None = None
        self.max_temperature_c: float | None = None
        self.slowdown_temperature_c: float | None = None
        self.ecc_last: dict[int, list[int | None]] = {}  # gpu -> [corrected, uncorrected] at the last reading
        self.ecc_new: dict[int, list[int]] = {}
        self.energy_first: dict[int, float] = {}
        self.energy_last: dict[int, float] = {}
        self.energy_estimated_j = 0.0
        self.energy_estimated = False
        self.xids: list[dict[str, Any]] = []
        self.lost: list[dict[str, Any]] = []
        self.pcie_degraded: set[int] = set()
        self.skipped_readings = 0
        self.unavailable: str | None = None
        self.throttled_now = False
        self.streak = 0
        self.epoch_seen_s = 0.0
        self.epoch_throttled_s = 0.0
        self.last_epoch: dict[str, Any] | None = None
        self.notified: set[str] = set()

    # -- input --------------------------------------------------------------------------------------------
    def _run_gpus(self, readings: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for reading in readings:
            if reading.get("own_pids"):
                self.own_gpus.add(int(reading.get("index", -1)))
        if self.own_gpus:
            wanted = self.own_gpus
        elif self.device_gpus:
            wanted = set(self.device_gpus)
        else:
            wanted = {int(r.get("index", -1)) for r in readings}
        self.gpus = sorted(wanted)
        return [r for r in readings if int(r.get("index", -1)) in wanted]

    def add(self, snapshot: dict[str, Any]) -> list[str]:
        """Take one sample; returns the news worth a notification ('throttle', 'ecc', 'xid', 'lost')."""
        news: list[str] = []
        ts = sanity.number(snapshot.get("ts"), (0.0, 1e11))
        if ts is None:
            return news
        if self.started is None:
            self.started = ts
        dt = 0.0 if self.last_ts is None else min(max(0.0, ts - self.last_ts), self.interval_s * MAX_DT_FACTOR)
        self.last_ts = self.updated = ts
        self.samples += 1
        self.seconds += dt
        readings = [r for r in snapshot.get("gpus") or [] if isinstance(r, dict)]
        if not snapshot.get("available"):
            reason = str(snapshot.get("reason") or "no GPU readings")[:200]
            self.unavailable = reason
            if self.gpus and "lost" in reason.lower():
                news += self._record_lost(self.gpus, ts, reason)
        else:
            self.unavailable = None
        mine = self._run_gpus(readings) if readings else []
        throttled, clock_pcts, groups, utils = False, [], [], []
        for reading in mine:
            index = int(reading.get("index", -1))
            self.skipped_readings += len(reading.get("skipped") or [])
            if reading.get("error"):
                if "lost" in str(reading["error"]).lower() or "bus" in str(reading["error"]).lower():
                    news += self._record_lost([index], ts, str(reading["error"]))
                continue
            news += self._ecc(index, reading)
            self._energy(index, reading, dt)
            self._temperature(reading)
            if reading.get("pcie_width") and reading.get("pcie_width_max") \
                    and reading["pcie_width"] < reading["pcie_width_max"]:
                self.pcie_degraded.add(index)
            mask = sanity.whole(reading.get("throttle_mask"), clocks.MASK_BOUNDS)
            util = sanity.number(reading.get("utilization_pct"), sanity.PERCENT)
            busy = not (mask is not None and mask & clocks.IDLE_BIT) and (util is None or util >= BUSY_UTIL_PCT)
            if util is not None:
                utils.append(util)
            pct = sanity.number(reading.get("sm_clock_pct"), sanity.PERCENT)
            if busy and pct is not None:
                self.min_clock_pct = pct if self.min_clock_pct is None else min(self.min_clock_pct, pct)
            reading_groups = clocks.reason_groups(mask)
            if busy and reading_groups:
                throttled = True
                groups += [g for g in reading_groups if g not in groups]
                if pct is not None:
                    clock_pcts.append(pct)
        if utils:
            self.util_sum += sum(utils) / len(utils) * dt
            self.util_s += dt
        if mine and any(not r.get("error") for r in mine):
            self.observed_s += dt
            self.epoch_seen_s += dt
        if throttled:
            self.throttled_s += dt
            self.epoch_throttled_s += dt
            for group in groups:
                self.reasons_s[group] = self.reasons_s.get(group, 0.0) + dt
            if clock_pcts:
                self.throttled_clock_sum += min(clock_pcts) * dt
                self.throttled_clock_s += dt
        self.throttled_now = throttled
        slow = throttled and (not clock_pcts or min(clock_pcts) < THROTTLE_CLOCK_PCT)
        self.streak = self.streak + 1 if slow else 0
        if self.streak >= 2:
            news += self._once("throttle")
        for event in snapshot.get("xids") or []:
            news += self._xid(event)
        return news

    def _once(self, kind: str) -> list[str]:
        if kind in self.notified:
            return []
        self.notified.add(kind)
        return [kind]

    def _record_lost(self, indices: Iterable[int], ts: float, why: str) -> list[str]:
        news: list[str] = []
        for index in indices:
            if any(entry.get("gpu") == index for entry in self.lost):
                continue
            if len(self.lost) < MAX_EVENTS:
                self.lost.append({"gpu": index, "ts": round(ts, 3), "error": why[:200]})
            news += self._once("lost")
        return news

    def _xid(self, event: Any) -> list[str]:
        if not isinstance(event, dict):
            return []
        xid = sanity.whole(event.get("xid"), sanity.XID)
        gpu = event.get("gpu")
        gpu = gpu if isinstance(gpu, int) and not isinstance(gpu, bool) else None
        if xid is None or (gpu is not None and self.gpus and gpu not in self.gpus):
            return []  # another GPU's Xid is not this run's
        if len(self.xids) < MAX_EVENTS:
            self.xids.append({"gpu": gpu, "xid": xid, "ts": sanity.number(event.get("ts"), (0.0, 1e11)),
                              "meaning": str(event.get("meaning") or "")[:120],
                              "source": str(event.get("source") or "")[:20]})
        news = self._once("xid")
        if xid == 79:
            news += self._record_lost([gpu] if gpu is not None else list(self.gpus), float(event.get("ts") or 0.0),
                                      "Xid 79: GPU has fallen off the bus")
        return news

    def _ecc(self, index: int, reading: dict[str, Any]) -> list[str]:
        """Count the growth of the corrected and uncorrected ECC counters since the first reading."""
        now = [ecc.corrected_total(reading), ecc.uncorrected_total(reading)]
        last = self.ecc_last.setdefault(index, [None, None])
        new = self.ecc_new.setdefault(index, [0, 0])
        news: list[str] = []
        for slot in (0, 1):
            value, before = now[slot], last[slot]
            if value is None:
                continue
            if before is not None:
                grown = value - before if value >= before else value  # below: the counter was reset, all new
                new[slot] += grown
                if slot == 1 and grown > 0:
                    news += self._once("ecc")
            last[slot] = value
        return news

    def _energy(self, index: int, reading: dict[str, Any], dt: float) -> None:
        energy = sanity.number(reading.get("energy_j"), (0.0, 2.0 ** 60))
        if energy is not None and (index not in self.energy_last or energy >= self.energy_last[index]):
            self.energy_first.setdefault(index, energy)
            self.energy_last[index] = energy
            return
        power = sanity.number(reading.get("power_w"), (0.0, 10_000.0))
        if power is not None and index not in self.energy_first:
            self.energy_estimated_j += power * dt
            self.energy_estimated = True

    def _temperature(self, reading: dict[str, Any]) -> None:
        temp = sanity.number(reading.get("temperature_c"), sanity.TEMPERATURE_C)
        if temp is not None:
            self.max_temperature_c = temp if self.max_temperature_c is None else max(self.max_temperature_c, temp)
        slowdown = sanity.number(reading.get("slowdown_temperature_c"), sanity.TEMPERATURE_C)
        if slowdown is not None:
            self.slowdown_temperature_c = slowdown if self.slowdown_temperature_c is None else \
                min(self.slowdown_temperature_c, slowdown)

    def mark_epoch(self, epoch: int | None) -> None:
        """An epoch ended: keep its throttled share as `last_epoch` and start counting the next."""
        if self.epoch_seen_s > 0:
            self.last_epoch = {"epoch": epoch, "seconds": round(self.epoch_seen_s, 1),
                               "throttled_pct": round(100.0 * self.epoch_throttled_s / self.epoch_seen_s, 1)}
        self.epoch_seen_s = self.epoch_throttled_s = 0.0

    # -- output -------------------------------------------------------------------------------------------
    @property
    def fault(self) -> bool:
        """True when an Xid was seen or a run GPU was lost during the attempt."""
        return bool(self.xids or self.lost)

    def energy_j(self) -> float | None:
        """Energy the run's GPUs used during the attempt (None when unknown)."""
        counted = sum(self.energy_last[i] - self.energy_first[i] for i in self.energy_last)
        if not self.energy_last and not self.energy_estimated:
            return None
        return counted + self.energy_estimated_j

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (status.json's `gpu_summary` entry for this attempt)."""
        seconds = self.observed_s or self.seconds
        ecc_new = None
        if self.ecc_new:
            ecc_new = {"corrected": sum(v[0] for v in self.ecc_new.values()),
                       "uncorrected": sum(v[1] for v in self.ecc_new.values())}
        energy = self.energy_j()
        return {
            "attempt": self.attempt, "gpus": list(self.gpus), "started": self.started, "updated": self.updated,
            "samples": self.samples, "seconds": round(seconds, 1),
            "throttled_s": round(self.throttled_s, 1),
            "throttled_pct": round(100.0 * self.throttled_s / seconds, 1) if seconds else None,
            "throttle_reasons_s": {k: round(v, 1) for k, v in self.reasons_s.items()},
            "throttled_clock_pct": round(self.throttled_clock_sum / self.throttled_clock_s, 1)
            if self.throttled_clock_s else None,
            "throttled_now": self.throttled_now,
            "min_clock_pct": self.min_clock_pct, "max_temperature_c": self.max_temperature_c,
            "slowdown_temperature_c": self.slowdown_temperature_c,
            "utilization_mean_pct": round(self.util_sum / self.util_s, 1) if self.util_s else None,
            "ecc_new": ecc_new,
            "energy_j": round(energy, 1) if energy is not None else None,
            "energy_estimated": self.energy_estimated and not self.energy_last,
            "xids": list(self.xids), "lost": list(self.lost), "pcie_degraded": sorted(self.pcie_degraded),
            "last_epoch": self.last_epoch, "skipped_readings": self.skipped_readings,
            "unavailable": self.unavailable,
        }


# ------------------------------------------------------------------------------------------- in words

def _num(value: Any) -> float | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def energy_text(joules: float | None, estimated: bool = False) -> str:
    """'1.23 kWh' / '56 Wh' (with '~' when estimated from power x time); '' when unknown."""
    if joules is None:
        return ""
    wh = joules / 3600.0
    text = f"{wh / 1000:.2f} kWh" if wh >= 1000 else f"{wh:.1f} Wh" if wh >= 1 else f"{joules:.0f} J"
    return ("~" if estimated else "") + text


def throttle_text(summary: dict[str, Any]) -> str:
    """'throttled 40 % of 2h10m (thermal 35 %, power cap 5 %), clocks at 56 % while throttled' or
    'not throttled'; '' when the reasons were never readable."""
    pct, seconds = _num(summary.get("throttled_pct")), _num(summary.get("seconds"))
    reasons = summary.get("throttle_reasons_s") if isinstance(summary.get("throttle_reasons_s"), dict) else {}
    if pct is None or not seconds:
        return ""
    if not _num(summary.get("throttled_s")):
        return "not throttled"
    parts = [f"{name} {100.0 * float(s) / seconds:.0f} %" for name, s in sorted(
        reasons.items(), key=lambda item: -float(item[1] if _num(item[1]) is not None else 0)) if _num(s)]
    text = f"throttled {pct:.0f} % of {formatting.duration(seconds)}" + (f" ({', '.join(parts)})" if parts else "")
    clock = _num(summary.get("throttled_clock_pct"))
    if clock is not None:
        text += f", SM clock at {clock:.0f} % while throttled"
    return text


def summary_lines(summary: Any) -> list[str]:
    """The summary of one attempt in a few lines (status, doctor, dashboard); [] when there is nothing."""
    if not isinstance(summary, dict) or not summary.get("samples"):
        return []
    gpus = summary.get("gpus") if isinstance(summary.get("gpus"), list) else []
    head = "GPU " + ",".join(str(g) for g in gpus) if gpus else "GPU"
    first = [throttle_text(summary)]
    low = _num(summary.get("min_clock_pct"))
    if low is not None:
        first.append(f"lowest SM clock {low:.0f} %")
    temp, slowdown = _num(summary.get("max_temperature_c")), _num(summary.get("slowdown_temperature_c"))
    if temp is not None:
        first.append(f"peak {temp:.0f}°C" + (f" (slows down at {slowdown:.0f}°C)" if slowdown is not None else ""))
    lines = [f"{head}: " + ", ".join(p for p in first if p)]
    second = []
    ecc_new = summary.get("ecc_new")
    if isinstance(ecc_new, dict):
        second.append(f"new ECC errors: {ecc_new.get('corrected', 0)} corrected, {ecc_new.get('uncorrected', 0)} "
                      "uncorrected")
    energy = energy_text(_num(summary.get("energy_j")), bool(summary.get("energy_estimated")))
    if energy:
        second.append(f"energy {energy}")
    util = _num(summary.get("utilization_mean_pct"))
    if util is not None:
        second.append(f"mean utilisation {util:.0f} %")
    if summary.get("pcie_degraded"):
        second.append("PCIe link below its width on GPU " + ",".join(map(str, summary["pcie_degraded"])))
    if second:
        lines.append("; ".join(second))
    for xid in (summary.get("xids") or [])[:3]:
        if isinstance(xid, dict):
            where = f"GPU {xid.get('gpu')}" if xid.get("gpu") is not None else "a GPU"
            lines.append(f"Xid {xid.get('xid')} on {where}: {xid.get('meaning') or ''}".rstrip(": "))
    for lost in (summary.get("lost") or [])[:3]:
        if isinstance(lost, dict):
            lines.append(f"GPU {lost.get('gpu')} lost: {lost.get('error') or 'fell off the bus'}")
    if summary.get("unavailable"):
        lines.append(f"readings: {summary['unavailable']}")
    return lines


def latest(summaries: Any) -> dict[str, Any] | None:
    """The newest attempt's summary from status.json's `gpu_summary` list (None when there is none)."""
    if not isinstance(summaries, list):
        return None
    entries = [s for s in summaries if isinstance(s, dict)]
    return entries[-1] if entries else None
