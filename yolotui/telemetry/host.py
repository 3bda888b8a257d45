"""Host CPU and memory readings (psutil), and the process tree of a run for marking its GPU processes."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class HostReading:
    """CPU use (percent of all cores since the previous reading) and RAM in MiB; None where unreadable."""

    cpu_pct: float | None = None
    mem_used_mb: float | None = None
    mem_total_mb: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form."""
        return asdict(self)


PRIME_INTERVAL_S = 0.1
_cpu_primed = False


def read_host() -> HostReading:
    """Read the host's CPU and memory now.

    psutil's CPU percent is the use since its previous call, and a process's very first call has nothing to
    compare with (it says 0.0 even on a busy machine): the first reading therefore measures over a short
    interval (PRIME_INTERVAL_S) so that no screen ever shows a false 0 %.
    """
    global _cpu_primed
    try:
        import psutil
    except ImportError:
        return HostReading()
    reading = HostReading()
    try:
        interval = None if _cpu_primed else PRIME_INTERVAL_S
        reading.cpu_pct = float(psutil.cpu_percent(interval=interval))
        _cpu_primed = True
    except (OSError, RuntimeError):
        pass
    try:
        memory = psutil.virtual_memory()
        reading.mem_used_mb = (memory.total - memory.available) / 2**20
        reading.mem_total_mb = memory.total / 2**20
    except (OSError, RuntimeError):
        pass
    return reading


def process_tree_pids(root_pid: int | None) -> set[int]:
    """`root_pid` and all its descendants (a trainer and its data workers / torchrun ranks); empty if gone."""
    if not root_pid:
        return set()
    try:
        import psutil

        root = psutil.Process(root_pid)
        return {root_pid, *(child.pid for child in root.children(recursive=True))}
    except Exception:  # noqa: BLE001 - psutil.Error, ImportError: the process is gone or unreadable
        return set()
