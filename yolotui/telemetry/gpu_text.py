"""The newer GPU readings in words, for `yolotui gpu`: throttling and clocks, memory clock, slowdown
temperature, ECC, PCIe link, energy, and the readings skipped for taking too long."""

from __future__ import annotations

from typing import Any

from yolotui.telemetry import board, clocks, ecc
from yolotui.telemetry.gpu_summary import energy_text


def detail_lines(reading: Any) -> list[str]:
    """Up to three lines for one GPU reading ([] when none of these readings is available)."""
    first = [clocks.describe(reading)]
    mem, mem_max = getattr(reading, "mem_clock_mhz", None), getattr(reading, "mem_clock_max_mhz", None)
    if mem is not None:
        first.append(f"memory clock {mem:.0f}" + (f"/{mem_max:.0f}" if mem_max else "") + " MHz")
    power, limit = getattr(reading, "power_w", None), getattr(reading, "power_limit_w", None)
    if power is not None and limit:
        first.append(f"power {power / limit * 100:.0f} % of the {limit:.0f} W limit")
    temp, slowdown = getattr(reading, "temperature_c", None), getattr(reading, "slowdown_temperature_c", None)
    if slowdown is not None:
        if temp is not None and temp >= slowdown:
            first.append(f"at or over its {slowdown:.0f}°C slowdown temperature!")
        else:
            first.append(f"slows down at {slowdown:.0f}°C" + (f" ({slowdown - temp:.0f}°C away)" if temp is not None
                                                             else ""))
    energy = energy_text(getattr(reading, "energy_j", None))
    second = [ecc.ecc_text(reading), board.pcie_text(reading),
              f"energy {energy} since the driver loaded" if energy else ""]
    lines = ["; ".join(p for p in first if p), "; ".join(p for p in second if p)]
    skipped = getattr(reading, "skipped", None) or []
    if skipped:
        lines.append("skipped this sample (NVML took over 1 s): " + ", ".join(skipped))
    return [line for line in lines if line]
