"""The shim kit: what both trainer shims (official/shim.py, ultralytics/shim.py) share, standard library only.

The shims run BY PATH in the trainer's own interpreter (Python >= 3.8), where yolotui may not be importable, so
this file is loaded by path too (a shim's `_kit()`, the module `yolotui_shimkit`), and it loads yolotui's one
events writer, yolotui/runs/events.py, by path in turn: the engine and both shims write the same layout
(docs/long-runs.md) through the same code. Here: the shim's messages (`say`), the events writer, atomic
writes, the rewind of a resume (events and results.csv rows), checkpoint digests and the failure classes.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys

SHIM_PREFIX = "yolotui shim:"
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # run files are never written through a symlink
HERE = os.path.dirname(os.path.realpath(__file__))
FAILURE_CLASSES = ("oom", "comm", "data", "nan", "disk", "crash")  # as yolotui.supervisor.decision names them


def load_path(key, path):
    """The module in file `path` under the name `key`, loaded once per process."""
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[key]
            raise
    return sys.modules[key]


def load_beside(file, name):
    """The module `name`.py in the folder of `file` (a shim's sibling), loaded by path once per process."""
    folder = os.path.dirname(os.path.realpath(file))
    return load_path("yolotui_%s_%s" % (os.path.basename(folder), name), os.path.join(folder, name + ".py"))


events = load_path("yolotui_shimkit_events", os.path.join(os.path.dirname(HERE), "runs", "events.py"))


def say(message):
    """A line for train.log (the trainer's stdout), marked as the shim's."""
    print("%s %s" % (SHIM_PREFIX, message), flush=True)


class Events(events.EventWriter):
    """yolotui's events writer for a shim: a write that fails (a full disk, a planted link) is said in train.log
    and training goes on without that event."""

    def __init__(self, path, attempt):
        events.EventWriter.__init__(self, path, attempt, on_error=say)


def drop_events(path, later):
    """Rewind the run's events past a checkpoint (`later(event)`: true for an event to drop); bounded by the
    tail past it (yolotui.runs.events.rewind_run). Returns how many were dropped."""
    return events.rewind_run(path, later)


def to_float(value):
    """A finite float of `value` (a tensor of one item too), else None."""
    try:
        number = float(value)
    except (TypeError, ValueError, RuntimeError):
        return None
    return number if number == number and abs(number) != float("inf") else None


def atomic_write(path, data):
    """Write `data` (bytes or str) to `path` through a fsynced temporary file beside it and a rename."""
    path = os.fspath(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
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
    """Flush a folder's entries (a rename) to disk; quiet where that is not possible."""
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


def drop_rows(path, later, max_bytes=64 << 20):
    """Rewrite a results.csv without the rows whose first cell `later(float)` calls later, and without a torn
    or unreadable row; the header and the other rows kept as written. Returns how many rows were dropped."""
    try:
        with open(path, "rb") as handle:
            text = handle.read(max_bytes).decode("utf-8", "replace")
    except OSError:
        return 0
    lines = text.splitlines(True)
    if not lines:
        return 0
    kept, dropped = [lines[0]], 0
    for line in lines[1:]:
        try:
            drop = later(float(line.split(",", 1)[0].strip()))
        except ValueError:
            drop = True
        if drop or not line.endswith("\n"):
            dropped += 1
        else:
            kept.append(line)
    if dropped:
        atomic_write(path, "".join(kept))
    return dropped


def sha256_of(path):
    """Hex sha256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def classify(exc, text):
    """The failure class (FAILURE_CLASSES) of a training that raised `exc`, from it and its traceback text.

    Accelerator memory only is `oom`: a host allocation failure is a crash, as yolotui classes it."""
    name = type(exc).__name__
    lowered = text.lower()
    message = str(exc)
    host = any(word in lowered for word in ("defaultcpuallocator", "alloc_cpu", "cannot allocate memory"))
    if not host and ("out of memory" in lowered or "cublas_status_alloc_failed" in lowered
                     or name == "OutOfMemoryError"):
        return "oom"
    if "no space left on device" in lowered or "disk quota exceeded" in lowered:
        return "disk"
    if name in ("ConnectionResetError", "DistBackendError", "DistNetworkError") or "NCCL" in text:
        return "comm"
    if "NaN persisted" in message or "NaN/Inf" in message:
        return "nan"
    last = text.strip().splitlines()[-1] if text.strip() else ""
    if name == "FileNotFoundError" or ("Dataset" in message and "error" in message) or any(
            marker in last or marker in message for marker in (
                "File not found", "Dataset not found", "No labels found", "does not exist", "No such file")):
        return "data"  # a configuration error: retrying cannot help
    if "nan" in lowered and "loss" in lowered:
        return "nan"
    return "crash"
