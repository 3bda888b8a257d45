"""Supervisor liveness: the live supervisor holds an exclusive flock on RUN/.lock; PIDs are never trusted."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from yolotui.runs.layout import LOCK_FILE


def acquire(run_dir: Path) -> int | None:
    """Take the run's lock without waiting; return the open descriptor (keep it open) or None if held."""
    path = Path(run_dir) / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
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
        return (Path(run_dir) / LOCK_FILE).stat().st_mtime
    except OSError:
        return None


def is_held(run_dir: Path) -> bool:
    """True while some process holds the run's lock, i.e. its supervisor is alive."""
    path = Path(run_dir) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
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
