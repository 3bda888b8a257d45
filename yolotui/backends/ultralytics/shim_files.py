"""The ultralytics shim's file work: events.jsonl appends, atomic replaces, the rows and events a resume drops.

Standard library only (Python >= 3.8): loaded by path by shim.py in the trainer's interpreter, where yolotui
may not be importable. Every write is a whole line on an O_APPEND descriptor or a fsynced temporary file
renamed over the old one; nothing is written through a symlink.
"""

from __future__ import annotations

import hashlib
import json
import os
import time

SHIM_PREFIX = "yolotui shim:"
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # run files are never written through a symlink


def say(message):
    """A line for train.log (the trainer's stdout), marked as the shim's."""
    print("%s %s" % (SHIM_PREFIX, message), flush=True)


class Events:
    """Appends yolotui events to RUN/events.jsonl, one whole line per write."""

    def __init__(self, path, attempt):
        self.path = path
        self.attempt = attempt

    def emit(self, type_, **fields):
        event = {"ts": round(time.time(), 3), "type": type_, "attempt": self.attempt}
        event.update(fields)
        line = json.dumps(event, default=_plain, separators=(",", ":")) + "\n"
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | NOFOLLOW, 0o644)
        except OSError as exc:  # a full disk or a planted link: training goes on, the event is lost
            say("cannot write %s: %s" % (self.path, exc))
            return
        try:
            os.write(fd, line.encode("utf-8"))
        except OSError as exc:
            say("cannot write %s: %s" % (self.path, exc))
        finally:
            os.close(fd)


def _plain(value):
    for name in ("item", "tolist"):
        method = getattr(value, name, None)
        if callable(method):
            try:
                return method()
            except (TypeError, ValueError, RuntimeError):
                pass
    return str(value)


def to_float(value):
    try:
        number = float(value)
    except (TypeError, ValueError, RuntimeError):
        return None
    return number if number == number and abs(number) != float("inf") else None


def atomic_write(path, data):
    """Write bytes to `path` through a fsynced temporary file in the same folder and a rename."""
    path = os.fspath(path)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    try:
        os.unlink(tmp)  # a leftover (or a planted link) of an earlier process with this pid
    except OSError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(path) or ".")


def fsync_dir(folder):
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def drop_results_after(path, epochs_done):
    """Rewrite ultralytics' results.csv without rows past `epochs_done` (its epoch column counts from 1)
    and without a torn last row; returns how many rows were dropped."""
    try:
        with open(path, "rb") as handle:
            text = handle.read(64 << 20).decode("utf-8", "replace")
    except OSError:
        return 0
    lines = text.splitlines(True)
    if not lines:
        return 0
    kept, dropped = [lines[0]], 0
    for line in lines[1:]:
        try:
            later = float(line.split(",", 1)[0].strip()) > epochs_done
        except ValueError:
            later = True  # a torn or unreadable row
        if later or not line.endswith("\n"):
            dropped += 1
        else:
            kept.append(line)
    if dropped:
        atomic_write(path, "".join(kept).encode("utf-8"))
    return dropped


def drop_events_from(path, epoch):
    """Rewrite events.jsonl without batch/epoch/stop events of 0-based `epoch` and later, checkpoints past it
    (their epoch counts epochs done) and done events; returns how many were dropped. (A kept stop event would
    make the supervisor, which re-reads a replaced file from its start, take the new attempt for a stopped one.)"""
    try:
        with open(path, "rb") as handle:
            lines = handle.read(256 << 20).decode("utf-8", "replace").splitlines(True)
    except OSError:
        return 0
    kept, dropped = [], 0
    for line in lines:
        try:
            event = json.loads(line)
            at = int(event.get("epoch", 0) or 0)
        except (ValueError, TypeError, AttributeError):
            dropped += 1
            continue
        kind = event.get("type")
        if kind in ("batch", "epoch", "stop") and at >= epoch or kind == "checkpoint" and at > epoch or kind == "done":
            dropped += 1
            continue
        kept.append(line if line.endswith("\n") else line + "\n")
    if dropped:
        atomic_write(path, "".join(kept).encode("utf-8"))
    return dropped


def sha256_of(path):
    """Hex sha256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def atomic_path_class(base):
    """A subclass of the pathlib class `base` whose write_bytes is atomic (what ultralytics saves with)."""

    class AtomicPath(base):
        def write_bytes(self, data):
            atomic_write(self, data)
            return len(data)

    return AtomicPath


class Discard:
    """Stands in for best.pt during a save-now: ultralytics' write of it goes nowhere."""

    def write_bytes(self, data):
        return len(data)

    def exists(self):
        return False
