"""Small process facts read from /proc (Linux), with portable fallbacks: liveness, parent, process groups.

A zombie (exited, not yet reaped) counts as gone: it runs nothing and holds no files or locks.
"""

from __future__ import annotations

import os
from pathlib import Path

_PROC = Path("/proc")


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (state is [0], ppid [1], pgid [2]); None if gone."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may itself contain spaces or parentheses.
    return text[text.rfind(")") + 2 :].split()


def is_alive(pid: int | None) -> bool:
    """True when `pid` names a running (not zombie) process."""
    if not pid or pid <= 0:
        return False
    if _PROC.is_dir():
        fields = _stat_fields(pid)
        return fields is not None and fields[0] not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def parent_pid(pid: int) -> int | None:
    """The parent of `pid`, or None when unknown or gone."""
    fields = _stat_fields(pid)
    return int(fields[1]) if fields else None


def cmdline(pid: int) -> list[str]:
    """The argv of `pid` ([] when gone or unreadable)."""
    try:
        raw = (_PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group `pgid`."""
    if not pgid or pgid <= 0:
        return []
    if not _PROC.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        except PermissionError:
            pass
        return [pgid]
    members = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields and fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def signal_group(pgid: int, sig: int) -> bool:
    """Send `sig` to process group `pgid`; False when the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def start_time(pid: int) -> float | None:
    """When `pid` started, as unix seconds (from /proc: boot time + start ticks); None when unknown."""
    fields = _stat_fields(pid)
    if not fields or len(fields) < 20:
        return None
    try:
        ticks = int(fields[19])
        with open(_PROC / "stat", encoding="ascii") as handle:
            boot = next(int(line.split()[1]) for line in handle if line.startswith("btime "))
    except (OSError, ValueError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")
