"""Plausibility checks for NVML readings: a value outside what any GPU can report is no reading at all.

NVML (or a broken driver, or a fake) can answer with garbage: a negative temperature, a clock of 4e9 MHz,
0xFFFFFFFF for "unknown", text where a number belongs. `number` turns anything implausible into None, so
every screen shows "n/a" rather than nonsense, and no sum or maximum is poisoned by it.
"""

from __future__ import annotations

import math
from typing import Any

# NVML's "not available" sentinels for 32- and 64-bit counters
_SENTINELS = (0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF, 0x7FFFFFFF, 0x7FFFFFFFFFFFFFFF)

# (lowest, highest) plausible value of each kind of reading
TEMPERATURE_C = (-40.0, 150.0)
PERCENT = (0.0, 100.0)
FAN_PERCENT = (0.0, 200.0)  # some boards report over 100 % at full duty
CLOCK_MHZ = (1.0, 20_000.0)
POWER_MW = (0.0, 10_000_000.0)  # 10 kW
MEMORY_BYTES = (0.0, 2.0 ** 50)  # 1 PiB
ENERGY_MJ = (0.0, 2.0 ** 62)
ECC_COUNT = (0.0, 2.0 ** 48)
PCIE_GEN = (1.0, 10.0)
PCIE_WIDTH = (1.0, 64.0)
XID = (1.0, 10_000.0)


def number(value: Any, bounds: tuple[float, float]) -> float | None:
    """`value` as a float when it is a finite number within `bounds` (inclusive) and no NVML sentinel; else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int) and value in _SENTINELS:
        return None
    result = float(value)
    if not math.isfinite(result) or not bounds[0] <= result <= bounds[1]:
        return None
    return result


def whole(value: Any, bounds: tuple[float, float]) -> int | None:
    """`number` as an int (for counts, link widths, generations)."""
    result = number(value, bounds)
    return None if result is None or result != int(result) else int(result)
