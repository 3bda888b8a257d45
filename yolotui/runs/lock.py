"""Run liveness: whoever holds the exclusive flock on RUN/.lock owns the run; PIDs are never trusted.

The lock is taken by the process that starts or resumes a run *before* it touches run.yaml or opt.yaml
(`claim`), handed to the supervisor as an inherited descriptor, and by the supervisor to the trainer, so the
lock stays held while any process of the run lives: a killed supervisor leaves a trainer that still owns the
folder, and no second launch can start beside it. The claimer writes one line about itself into the lock
file (`pid 123: yolotui resume (since 19:04:05)`), which a loser quotes to name the winner.

Readers probe the lock with a shared, non-blocking flock for microseconds (`is_held`); a claimer retries
briefly so such a probe is never mistaken for an owner. `holders` lists the processes that hold a
descriptor of the lock file (from /proc), which is how `stop` finds a trainer whose supervisor is gone.
"""

from __future__ import annotations

import fcntl
import os
import shlex
import time
from pathlib import Path

from yolotui.errors import UserError
from yolotui.runs.layout import LOCK_FILE

SUPERVISOR_WAIT_S = 1.0  # readers probe the lock for microseconds: a supervisor retries this long first
LOCK_FD_FLAG = "--lock-fd"  # tells the supervisor which inherited descriptor holds the run's lock

CLAIM_TRIES = 20  # readers probe the lock for microseconds; retry briefly before concluding it is taken
CLAIM_PAUSE_S = 0.05
OWNER_MAX_BYTES = 512


class RunBusy(UserError):
    """Another process owns the run's lock; the message names it. Exit code 1."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=1)


def lock_path(run_dir: Path) -> Path:
    """Where a run's lock file lives."""
    return Path(run_dir) / LOCK_FILE


def acquire(run_dir: Path) -> int | None:
    """Take the run's lock without waiting; return the open descriptor (keep it open) or None if held."""
    path = lock_path(run_dir)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    os.set_inheritable(fd, False)
    try:
        os.utime(fd)  # the lock file's mtime says when a supervisor last took the lock (see taken_at)
    except OSError:
        pass
    return fd


def taken_at(run_dir: Path) -> float | None:
    """When a process last took the run's lock (the lock file's mtime), None when it never was."""
    try:
        return lock_path(run_dir).stat().st_mtime
    except OSError:
        return None


def owner(run_dir: Path) -> str:
    """The line the lock's owner wrote about itself ('' when none or unreadable)."""
    try:
        with open(lock_path(run_dir), "rb") as handle:
            text = handle.read(OWNER_MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""
    return " ".join(text.split())


def owner_pid(run_dir: Path) -> int | None:
    """The pid named in the lock file's owner line (the process that claimed the run), if any."""
    words = owner(run_dir).split()
    if len(words) >= 2 and words[0] == "pid" and words[1].rstrip(":").isdigit():
        return int(words[1].rstrip(":"))
    return None


def write_owner(fd: int, who: str) -> None:
    """Record in the lock file who owns the run now (one line, quoted by a loser of `claim`)."""
    line = f"pid {os.getpid()}: {who} (since {time.strftime('%H:%M:%S')})\n".encode("utf-8", "replace")
    try:
        line = line[:OWNER_MAX_BYTES]
        os.pwrite(fd, line, 0)  # write, then cut the tail: a reader never sees an empty file
        os.ftruncate(fd, len(line))
    except OSError:
        pass  # a full disk: the lock itself still works, only the loser's message is poorer


def claim(run_dir: Path, who: str, tries: int = CLAIM_TRIES) -> int:
    """Take the run's lock for `who` (e.g. 'yolotui resume'); RunBusy naming the owner when another has it.

    Returns the descriptor; keep it open for as long as the run must stay owned (pass it on to the
    supervisor with `launcher.launch(lock_fd=...)`), or close it with `release`.
    """
    for attempt in range(max(1, tries)):
        fd = acquire(run_dir)
        if fd is not None:
            write_owner(fd, who)
            return fd
        if attempt + 1 < tries:
            time.sleep(CLAIM_PAUSE_S)
    held_by = ""
    for _ in range(10):  # the winner writes its line just after it takes the lock
        held_by = owner(run_dir)
        if held_by:
            break
        time.sleep(0.02)
    held_by = held_by or "another process"
    raise RunBusy(f"run {Path(run_dir).name} is live, owned by {held_by}: "
                  f"nothing changed here; see `yolotui status {shlex.quote(str(run_dir))}`")


def release(fd: int | None) -> None:
    """Close a descriptor from `claim`/`acquire` (the lock ends when no process holds it any more)."""
    if fd is None:
        return
    try:
        os.close(fd)
    except OSError:
        pass


def is_held(run_dir: Path) -> bool:
    """True while some process holds the run's lock, i.e. some process of the run is alive."""
    path = lock_path(run_dir)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def holders(run_dir: Path) -> list[int]:
    """PIDs of the processes (of this user) that have the run's lock file open: the run's live processes.

    Read from /proc/PID/fd; [] where /proc is missing. A reader's momentary probe may show up too, so
    callers check that a pid still holds the file before they act on it.
    """
    try:
        target = os.stat(lock_path(run_dir))
    except OSError:
        return []
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    me = os.getpid()
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            fds = os.listdir(entry / "fd")
        except OSError:
            continue
        for fd in fds:
            try:
                st = os.stat(entry / "fd" / fd)
            except OSError:
                continue
            if st.st_ino == target.st_ino and st.st_dev == target.st_dev:
                found.append(int(entry.name))
                break
    return sorted(found)


def acquire_within(run_dir: Path, wait_s: float = SUPERVISOR_WAIT_S) -> int | None:
    """Take RUN/.lock, retrying for `wait_s` past readers' momentary shared probes; None if really held."""
    deadline = time.monotonic() + wait_s
    while True:
        fd = acquire(run_dir)
        if fd is not None:
            return fd
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def adopt(run_dir: Path, fd: int) -> int | None:
    """Take over the lock descriptor the launcher handed down; None unless it really is RUN/.lock, held."""
    try:
        mine, expected = os.fstat(fd), os.stat(lock_path(run_dir))
        if (mine.st_dev, mine.st_ino) != (expected.st_dev, expected.st_ino):
            return None
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # ours already (same open file): succeeds at once
    except OSError:
        return None
    os.set_inheritable(fd, False)
    return fd
