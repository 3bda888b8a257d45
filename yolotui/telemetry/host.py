"""Host CPU, memory and swap readings (psutil), the run's own share of them, and the process tree of a run.

The OOM killer is a top cause of silent deaths, so RAM and swap are always read, and with the run's processes
given, their resident memory and swapped-out memory (from /proc/PID/status: VmRSS, VmSwap) as the run's share.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass
class HostReading:
    """CPU use (percent of all cores since the previous reading), RAM and swap in MiB, and the run's share of
    them (its processes' resident and swapped-out memory); None where unreadable or no run was given."""

    cpu_pct: float | None = None
    mem_used_mb: float | None = None
    mem_total_mb: float | None = None
    swap_used_mb: float | None = None
    swap_total_mb: float | None = None
    run_rss_mb: float | None = None
    run_swap_mb: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form."""
        return asdict(self)


PRIME_INTERVAL_S = 0.1
_cpu_primed = False


def run_memory_mb(pids: Iterable[int]) -> tuple[float | None, float | None]:
    """(resident, swapped-out) MiB of the processes `pids`, from /proc/PID/status; (None, None) when none read."""
    rss = swap = 0
    read = False
    for pid in pids:
        try:
            text = Path(f"/proc/{int(pid)}/status").read_text()
        except (OSError, ValueError):
            continue
        read = True
        for line in text.splitlines():
            if line.startswith("VmRSS:"):
                rss += int(line.split()[1])
            elif line.startswith("VmSwap:"):
                swap += int(line.split()[1])
    return (rss / 1024, swap / 1024) if read else (None, None)


def read_host(run_pids: Iterable[int] = ()) -> HostReading:
    """Read the host's CPU, memory and swap now, and the share of the processes `run_pids`.

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
    try:
        swap = psutil.swap_memory()
        reading.swap_used_mb, reading.swap_total_mb = swap.used / 2**20, swap.total / 2**20
    except (OSError, RuntimeError):
        pass
    reading.run_rss_mb, reading.run_swap_mb = run_memory_mb(run_pids)
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
