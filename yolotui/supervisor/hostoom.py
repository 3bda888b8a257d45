"""Was the trainer killed by the kernel's OOM killer? Evidence for the `host-oom` failure class.

A SIGKILL nobody in yolotui sent is `host-oom` (remedy: half the data-loader workers and no `--cache ram`,
then resume) when one of these holds, else it stays `killed`:

- the `oom_kill` count of the run's memory cgroup rose during the attempt (cgroup v2 `memory.events`,
  v1 `memory.oom_control`);
- a readable kernel log line says the OOM killer killed one of the attempt's processes;
- the run's resident memory was within `NEAR_LIMIT` of the memory limit (the cgroup's, else the machine's) at
  the supervisor's last sample before the kill.

The cgroup folder is the supervisor's own (the trainer inherits it), found from /proc/self/cgroup; the
environment variable YOLOTUI_CGROUP_DIR overrides it (tests point it at a folder of simulated files).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

CGROUP_ENV = "YOLOTUI_CGROUP_DIR"
CGROUP_ROOT = Path("/sys/fs/cgroup")
NEAR_LIMIT = 0.9  # RSS at or above this fraction of the limit just before a SIGKILL counts as evidence
KERNEL_LOGS = (Path("/var/log/kern.log"), Path("/var/log/messages"))
_KERNEL_TAIL = 256 * 1024


def cgroup_dir() -> Path | None:
    """The memory cgroup folder of this process (YOLOTUI_CGROUP_DIR wins); None when not found."""
    override = os.environ.get(CGROUP_ENV)
    if override:
        return Path(override)
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":  # cgroup v2 unified hierarchy
            folder = CGROUP_ROOT / path.lstrip("/")
            if (folder / "memory.events").exists():
                return folder
        elif "memory" in controllers.split(","):
            folder = CGROUP_ROOT / "memory" / path.lstrip("/")
            if folder.is_dir():
                return folder
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def oom_kill_count(folder: Path | None) -> int | None:
    """The cgroup's `oom_kill` counter (v2 memory.events or v1 memory.oom_control); None when unreadable."""
    if folder is None:
        return None
    for name in ("memory.events", "memory.oom_control"):
        match = re.search(r"^oom_kill\s+(\d+)", _read(folder / name), re.MULTILINE)
        if match:
            return int(match.group(1))
    return None


def memory_limit(folder: Path | None) -> int | None:
    """The memory limit in bytes: the cgroup's (memory.max / memory.limit_in_bytes), else the machine's RAM."""
    for name in ("memory.max", "memory.limit_in_bytes"):
        text = _read(folder / name).strip() if folder is not None else ""
        if text.isdigit() and int(text) < 1 << 60:  # v1 writes a huge number for "no limit"
            return int(text)
    match = re.search(r"^MemTotal:\s+(\d+) kB", _read(Path("/proc/meminfo")), re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None


def group_rss(pgid: int | None) -> int:
    """Resident bytes of every live process in process group `pgid` (the trainer and its workers)."""
    from yolotui import procs

    total = 0
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    for pid in procs.group_members(pgid or 0):
        fields = _read(Path(f"/proc/{pid}/statm")).split()
        if len(fields) > 1 and fields[1].isdigit():
            total += int(fields[1]) * page
    return total


def kernel_log_line(pids: list[int]) -> str | None:
    """The last readable kernel log line saying the OOM killer killed one of `pids`, if any."""
    wanted = {str(p) for p in pids if p}
    for path in KERNEL_LOGS:
        try:
            with open(path, "rb") as handle:
                size = handle.seek(0, os.SEEK_END)
                handle.seek(max(0, size - _KERNEL_TAIL))
                text = handle.read().decode("utf-8", "replace")
        except OSError:
            continue
        for line in reversed(text.splitlines()):
            match = re.search(r"(?:Out of memory|oom-kill|Memory cgroup out of memory).*?[Kk]illed process (\d+)",
                              line)
            if match and match.group(1) in wanted:
                return line.strip()[-300:]
    return None


class MemoryWatch:
    """Samples the run's memory during an attempt and judges a SIGKILL at its end."""

    def __init__(self) -> None:
        self.folder = cgroup_dir()
        self.kills_before = oom_kill_count(self.folder)
        self.limit = memory_limit(self.folder)
        self.last_fraction: float | None = None
        self.peak_rss = 0

    def sample(self, pgid: int | None) -> None:
        """Record the group's resident memory now, as a fraction of the limit."""
        rss = group_rss(pgid)
        if rss:
            self.peak_rss = max(self.peak_rss, rss)
            self.last_fraction = rss / self.limit if self.limit else None

    def evidence(self, pids: list[int]) -> str | None:
        """Why the SIGKILL that ended the attempt was the OOM killer's, or None when nothing says so."""
        after = oom_kill_count(self.folder)
        if after is not None and self.kills_before is not None and after > self.kills_before:
            return f"the memory cgroup's oom_kill count rose from {self.kills_before} to {after}"
        line = kernel_log_line(pids)
        if line:
            return f"kernel log: {line}"
        if self.last_fraction is not None and self.last_fraction >= NEAR_LIMIT:
            return (f"resident memory was {self.last_fraction:.0%} of the {self.limit / 2**30:.1f} GiB limit "
                    "just before the kill")
        return None
