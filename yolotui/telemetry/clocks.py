"""Why a GPU runs slower than it can: clock-event (throttle) reasons in words, clocks against their maxima,
and temperature against the slowdown threshold.

NVML reports the reasons as a bit mask (`nvmlDeviceGetCurrentClocksEventReasons`, called
`nvmlDeviceGetCurrentClocksThrottleReasons` by older drivers); `reason_words` decodes it. "Throttled" means
a reason that slows a busy GPU down: thermal (hardware or software), the power cap, a hardware slowdown, the
power brake (or a board/reliability limit). Idle, sync boost, application-clock and display-clock settings
are reported but are not throttling.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from yolotui.telemetry import sanity

# (bit, detailed words, short group) in the order they are shown; the bits are nvml.h's clocks-event reasons.
REASONS: tuple[tuple[int, str, str], ...] = (
    (0x40, "thermal (hardware)", "thermal"),
    (0x20, "thermal (software)", "thermal"),
    (0x80, "power brake", "power brake"),
    (0x04, "power cap", "power cap"),
    (0x08, "hardware slowdown", "hardware slowdown"),
    (0x200, "board limit", "board limit"),
    (0x400, "reliability", "reliability"),
    (0x10, "sync boost", "sync boost"),
    (0x02, "application clocks", "application clocks"),
    (0x100, "display clock", "display clock"),
    (0x01, "idle", "idle"),
)
SLOWDOWN_BITS = 0x40 | 0x20 | 0x80 | 0x04 | 0x08 | 0x200 | 0x400
IDLE_BIT = 0x01
KNOWN_BITS = sum(bit for bit, _, _ in REASONS)
MASK_BOUNDS = (0.0, float(2 ** 64 - 1))
CLOCK_SM = 1  # NVML_CLOCK_SM
CLOCK_MEM = 2  # NVML_CLOCK_MEM
THRESHOLD_SLOWDOWN = 1  # NVML_TEMPERATURE_THRESHOLD_SLOWDOWN

Query = Callable[..., Any]


def as_mask(value: Any) -> int | None:
    """`value` as a reasons mask, or None when it is not one (garbage from NVML or a file)."""
    return sanity.whole(value, MASK_BOUNDS)


def reason_words(mask: Any) -> list[str] | None:
    """The reasons set in `mask`, in words ('thermal (hardware)', 'power cap' ...); None when unknown."""
    mask = as_mask(mask)
    if mask is None:
        return None
    return [words for bit, words, _ in REASONS if mask & bit]


def reason_groups(mask: Any, slowdown_only: bool = True) -> list[str]:
    """The short groups of the reasons in `mask` ('thermal', 'power cap' ...), each once; by default only
    those that slow a busy GPU down."""
    mask = as_mask(mask)
    groups: list[str] = []
    for bit, _, group in REASONS:
        if mask and mask & bit and (not slowdown_only or bit & SLOWDOWN_BITS) and group not in groups:
            groups.append(group)
    if "hardware slowdown" in groups and ("thermal" in groups or "power brake" in groups):
        groups.remove("hardware slowdown")  # NVML sets it alongside them: the umbrella, not another cause
    return groups


def is_throttled(mask: Any) -> bool | None:
    """True when a slowdown reason is set; None when the reasons are unknown."""
    mask = as_mask(mask)
    return None if mask is None else bool(mask & SLOWDOWN_BITS)


def clock_pct(current: float | None, maximum: float | None) -> float | None:
    """`current` as a percentage of `maximum` (at most 100); None when either is unknown or they disagree
    absurdly (a current clock over one and a half times the maximum is a broken reading)."""
    if current is None or not maximum or current > maximum * 1.5:
        return None
    return round(min(100.0, current / maximum * 100.0), 1)


def read_clocks(reading: Any, query: Query, nvml: Any, handle: Any) -> None:
    """Fill `reading`'s throttle and clock fields from NVML (each None where unsupported or implausible)."""
    mask = None
    for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
        func = getattr(nvml, name, None)
        if func is not None:
            mask = as_mask(query(func, handle))
            if mask is not None:
                break
    reading.throttle_mask = mask
    reading.throttle_reasons = reason_words(mask)
    reading.throttled = is_throttled(mask)
    sm_id = getattr(nvml, "NVML_CLOCK_SM", CLOCK_SM)
    mem_id = getattr(nvml, "NVML_CLOCK_MEM", CLOCK_MEM)
    current = getattr(nvml, "nvmlDeviceGetClockInfo", None)
    maximum = getattr(nvml, "nvmlDeviceGetMaxClockInfo", None)
    reading.sm_clock_mhz = sanity.number(query(current, handle, sm_id), sanity.CLOCK_MHZ) if current else None
    reading.sm_clock_max_mhz = sanity.number(query(maximum, handle, sm_id), sanity.CLOCK_MHZ) if maximum else None
    reading.mem_clock_mhz = sanity.number(query(current, handle, mem_id), sanity.CLOCK_MHZ) if current else None
    reading.mem_clock_max_mhz = sanity.number(query(maximum, handle, mem_id), sanity.CLOCK_MHZ) if maximum else None
    reading.sm_clock_pct = clock_pct(reading.sm_clock_mhz, reading.sm_clock_max_mhz)
    reading.mem_clock_pct = clock_pct(reading.mem_clock_mhz, reading.mem_clock_max_mhz)
    threshold = getattr(nvml, "nvmlDeviceGetTemperatureThreshold", None)
    slowdown = getattr(nvml, "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", THRESHOLD_SLOWDOWN)
    reading.slowdown_temperature_c = sanity.number(query(threshold, handle, slowdown), sanity.TEMPERATURE_C) \
        if threshold else None


def _get(reading: Any, name: str) -> Any:
    return reading.get(name) if isinstance(reading, dict) else getattr(reading, name, None)


def describe(reading: Any) -> str:
    """One line such as 'throttled: thermal, SM 1100/1980 MHz (56 %)', 'not throttled, SM 1980/1980 MHz (100 %)'
    or 'idle, ...'; the clock part only where known; '' when nothing is known. `reading` is a GpuReading or
    its dict form."""
    mask = as_mask(_get(reading, "throttle_mask"))
    groups = reason_groups(mask)
    if groups:
        head = "throttled: " + ", ".join(groups)
    elif mask is not None and mask & IDLE_BIT:
        head = "idle"
    elif mask is not None:
        head = "not throttled"
    else:
        head = ""
    clock = clock_text(reading)
    return ", ".join(part for part in (head, clock) if part)


def clock_text(reading: Any) -> str:
    """'SM 1100/1980 MHz (56 %)' (or the parts that are known); '' when the SM clock is unknown."""
    current = sanity.number(_get(reading, "sm_clock_mhz"), sanity.CLOCK_MHZ)
    maximum = sanity.number(_get(reading, "sm_clock_max_mhz"), sanity.CLOCK_MHZ)
    if current is None:
        return ""
    text = f"SM {current:.0f}" + (f"/{maximum:.0f}" if maximum else "") + " MHz"
    pct = sanity.number(_get(reading, "sm_clock_pct"), sanity.PERCENT)
    return text + (f" ({pct:.0f} %)" if pct is not None else "")
