"""Writing run files safely: crash-safe replacement (a kill at any instant leaves the old file or the new one,
never a torn one) and no write through a symbolic link.

A run folder may be shared or restored from elsewhere; a `train.log` that is a symlink to `~/.bashrc` must
not make the supervisor append to `~/.bashrc`. Every append to a run file goes through `open_append`, which
opens with O_NOFOLLOW and refuses a link (or anything but a regular file) with a line naming the file;
replaced files (status.json, checkpoints) are refused the same way by `refuse_link` before the rename.
"""

from __future__ import annotations

import errno
import io
import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from yolotui.errors import UserError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
PRIVATE_MODE = 0o600  # train.log, supervisor.log: the user's alone, like run.yaml


class RunFileLink(UserError):
    """A run file is a symbolic link (or not a regular file): yolotui refuses to write through it."""


def _refusal(path: Path) -> RunFileLink:
    return RunFileLink(f"refusing to write {path}: it is a symbolic link or not a regular file; "
                       "remove it (yolotui writes run files only as plain files)")


def refuse_link(path: Path) -> None:
    """Raise RunFileLink when `path` exists as a symlink or as something other than a regular file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise _refusal(Path(path))


def open_append(path: Path, mode: int = 0o644, private: bool = False) -> int:
    """An O_APPEND descriptor of the regular file `path` (created if missing), never through a symlink.

    `private`: the file is the user's alone (0600, like run.yaml): created so, and an older one of ours that
    others could read is made so (train.log and supervisor.log may quote what a run was given).
    """
    path = Path(path)
    if private:
        mode = PRIVATE_MODE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0), mode)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENXIO):
            raise _refusal(path) from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):  # a FIFO or device planted under a run file's name
        os.close(fd)
        raise _refusal(path)
    if private and st.st_mode & 0o077 and st.st_uid == os.geteuid():
        try:
            os.fchmod(fd, PRIVATE_MODE)
        except OSError:
            pass
    return fd


def append_bytes(path: Path, data: bytes, private: bool = False) -> None:
    """Append `data` to `path` with one write (see `open_append`)."""
    fd = open_append(path, private=private)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


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

    from yolotui.runs.atomic import refuse_link

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    refuse_link(path)  # never replace a planted symlink silently
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
