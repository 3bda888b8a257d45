"""ECC memory error counts of a GPU: volatile (since the driver loaded) and aggregate (the board's lifetime),
corrected and uncorrected, read only where ECC is on.

Corrected errors are fixed by the hardware and cost nothing but a warning sign when they climb; an uncorrected
error corrupts data and usually ends the CUDA context (the run crashes later, often with an Xid 48 or 63/64).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from yolotui.telemetry import sanity

CORRECTED, UNCORRECTED = 0, 1  # NVML_MEMORY_ERROR_TYPE_*
VOLATILE, AGGREGATE = 0, 1  # NVML_VOLATILE_ECC, NVML_AGGREGATE_ECC

Query = Callable[..., Any]


def read_ecc(reading: Any, query: Query, nvml: Any, handle: Any) -> None:
    """Fill `reading.ecc_enabled`, `ecc_volatile` and `ecc_aggregate` ({'corrected': n, 'uncorrected': n}, each
    count None where unsupported); the counts stay None when ECC is off or its mode unknown."""
    reading.ecc_enabled = None
    reading.ecc_volatile = None
    reading.ecc_aggregate = None
    mode_func = getattr(nvml, "nvmlDeviceGetEccMode", None)
    mode = query(mode_func, handle) if mode_func is not None else None
    current = mode[0] if isinstance(mode, (list, tuple)) and mode else mode
    if isinstance(current, bool) or not isinstance(current, int) or current not in (0, 1):
        return
    reading.ecc_enabled = bool(current)
    counts_func = getattr(nvml, "nvmlDeviceGetTotalEccErrors", None)
    if not reading.ecc_enabled or counts_func is None:
        return
    corrected = getattr(nvml, "NVML_MEMORY_ERROR_TYPE_CORRECTED", CORRECTED)
    uncorrected = getattr(nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", UNCORRECTED)
    for attribute, counter in (("ecc_volatile", getattr(nvml, "NVML_VOLATILE_ECC", VOLATILE)),
                               ("ecc_aggregate", getattr(nvml, "NVML_AGGREGATE_ECC", AGGREGATE))):
        counts = {"corrected": sanity.whole(query(counts_func, handle, corrected, counter), sanity.ECC_COUNT),
                  "uncorrected": sanity.whole(query(counts_func, handle, uncorrected, counter), sanity.ECC_COUNT)}
        setattr(reading, attribute, counts if any(v is not None for v in counts.values()) else None)


def ecc_text(reading: Any) -> str:
    """'ECC off', 'ECC on: volatile 0 corrected / 0 uncorrected, aggregate 3 / 0', or '' when unknown."""
    enabled = getattr(reading, "ecc_enabled", None)
    if enabled is None:
        return ""
    if not enabled:
        return "ECC off"
    parts = []
    for label, counts in (("volatile", getattr(reading, "ecc_volatile", None)),
                          ("aggregate", getattr(reading, "ecc_aggregate", None))):
        if isinstance(counts, dict):
            parts.append(f"{label} {_n(counts.get('corrected'))} corrected / {_n(counts.get('uncorrected'))} "
                         "uncorrected")
    return "ECC on" + (": " + ", ".join(parts) if parts else "")


def _field(reading: Any, name: str) -> Any:
    return reading.get(name) if isinstance(reading, dict) else getattr(reading, name, None)


def uncorrected_total(reading: Any) -> int | None:
    """The uncorrected count (of a reading or its dict form) the run summary follows: volatile where known (it moves at once; the aggregate may
    be updated later), else aggregate; None if neither."""
    for attribute in ("ecc_volatile", "ecc_aggregate"):
        counts = _field(reading, attribute)
        if isinstance(counts, dict) and isinstance(counts.get("uncorrected"), int):
            return int(counts["uncorrected"])
    return None


def corrected_total(reading: Any) -> int | None:
    """As `uncorrected_total`, for corrected errors."""
    for attribute in ("ecc_volatile", "ecc_aggregate"):
        counts = _field(reading, attribute)
        if isinstance(counts, dict) and isinstance(counts.get("corrected"), int):
            return int(counts["corrected"])
    return None


def _n(value: Any) -> str:
    return "n/a" if value is None else str(value)
