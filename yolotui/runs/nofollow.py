"""Writing into a run folder without following symbolic links (issue 14, item 10).

A run folder may be shared or restored from elsewhere; a `train.log` that is a symlink to `~/.bashrc` must
not make the supervisor append to `~/.bashrc`. Every append to a run file goes through `open_append`, which
opens with O_NOFOLLOW and refuses a link (or anything but a regular file) with a line naming the file;
replaced files (status.json, checkpoints) are refused the same way by `refuse_link` before the rename.
"""

from __future__ import annotations

import errno
import os
import stat
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
