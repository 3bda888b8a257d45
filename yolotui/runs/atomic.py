"""Crash-safe file replacement: a kill at any instant leaves the old file or the new one, never a torn one."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def fsync_dir(folder: Path) -> None:
    """Flush a folder's entries to disk so a completed rename survives a power cut."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_open(path: Path, mode: str = "wb") -> Iterator[io.IOBase]:  # typing is not imported: `yolotui ls` loads this
    """Open a temporary file beside `path`; on a clean exit flush, fsync and `os.replace` it into place."""
    import tempfile  # here, not at the top: `yolotui ls` never writes and should not pay for it

    from yolotui.runs.nofollow import refuse_link

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    refuse_link(path)  # never replace a planted symlink silently (issue 14, item 10)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(path.parent)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace `path` with `data` atomically."""
    with atomic_open(path, "wb") as handle:
        handle.write(data)


def atomic_write_text(path: Path, text: str) -> None:
    """Replace `path` with UTF-8 `text` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, obj: object) -> None:
    """Replace `path` with `obj` as indented JSON atomically."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def read_json(path: Path) -> object | None:
    """Read a JSON file written by `atomic_write_json`; None when it is absent or unreadable."""
    try:
        with open(path, "rb") as handle:
            return json.loads(handle.read())
    except (OSError, ValueError, RecursionError):  # RecursionError: nested too deep to parse
        return None
