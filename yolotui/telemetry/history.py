"""A bounded history of GPU snapshots, with per-GPU and host series for sparklines."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

from yolotui.telemetry.gpu import GpuSnapshot


class History:
    """The last `maxlen` snapshots; older ones fall off."""

    def __init__(self, maxlen: int = 120) -> None:
        if maxlen < 1:
            raise ValueError("History needs maxlen >= 1")
        self._snapshots: deque[GpuSnapshot] = deque(maxlen=maxlen)

    @property
    def maxlen(self) -> int:
        """How many snapshots are kept."""
        return self._snapshots.maxlen or 0

    def append(self, snapshot: GpuSnapshot) -> None:
        """Add a snapshot (the oldest falls off when full)."""
        self._snapshots.append(snapshot)

    def __len__(self) -> int:
        return len(self._snapshots)

    def __iter__(self) -> Iterator[GpuSnapshot]:
        return iter(self._snapshots)

    @property
    def latest(self) -> GpuSnapshot | None:
        """The newest snapshot, or None when empty."""
        return self._snapshots[-1] if self._snapshots else None

    def clear(self) -> None:
        """Forget everything."""
        self._snapshots.clear()

    def series(self, gpu_index: int, field: str) -> list[Any]:
        """One GpuReading field of GPU `gpu_index` over time (None where it was unavailable or the GPU absent)."""
        values: list[Any] = []
        for snapshot in self._snapshots:
            reading = next((g for g in snapshot.gpus if g.index == gpu_index), None)
            values.append(getattr(reading, field, None) if reading is not None else None)
        return values

    def host_series(self, field: str) -> list[Any]:
        """One HostReading field over time."""
        return [getattr(snapshot.host, field, None) for snapshot in self._snapshots]

    def timestamps(self) -> list[float]:
        """The snapshots' times."""
        return [snapshot.ts for snapshot in self._snapshots]


HISTORY_S = 600.0  # the GPU panel keeps ten minutes


def samples_for(seconds: float, interval_s: float | None, floor: int = 60) -> int:
    """How many samples taken every `interval_s` cover `seconds` (at least `floor`)."""
    if not interval_s or interval_s <= 0:
        return floor
    return max(floor, int(-(-seconds // interval_s)))


def downsample(values: list[Any], width: int) -> list[Any]:
    """`values` squeezed into at most `width` points, each the largest of its bucket (peaks stay visible);
    None where a bucket holds no reading."""
    if width <= 0:
        return []
    if len(values) <= width:
        return list(values)
    out: list[Any] = []
    for cell in range(width):
        start, end = cell * len(values) // width, (cell + 1) * len(values) // width
        bucket = [v for v in values[start:end] if v is not None]
        out.append(max(bucket) if bucket else None)
    return out
