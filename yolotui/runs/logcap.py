"""Bounded run logs: train.log and supervisor.log capped in place, their head and tail kept (docs/long-runs.md).

The trainer (and the supervisor, for its own log) write with O_APPEND descriptors they hold for hours, so a log
cannot be renamed away. Once a log passes its cap the supervisor copies what matters into NAME.1.log (for
train.log: train.1.log): the head of the run's first output (the command and the environment), a line saying
how much was cut, and the last TAIL_BYTES before the cut (what led up to it); then it truncates the log to zero
and the writers go on appending at its new end. Readers that follow a log by offset see it shrink and start
again from its beginning (the log panel, `yolotui logs -f`, the failure classifier through `tail_text`).
Lines written between the copy and the truncation (a few milliseconds) are lost; nothing else is.
"""

from __future__ import annotations

import os
from pathlib import Path

TRAIN_LOG_CAP = 16 * 1024 * 1024
SUPERVISOR_LOG_CAP = 4 * 1024 * 1024
HEAD_BYTES = 64 * 1024
TAIL_BYTES = 1024 * 1024
CUT_MARK = b"[yolotui: "


def previous_path(path: Path) -> Path:
    """Where a capped log's head and last tail are kept: train.log -> train.1.log."""
    path = Path(path)
    return path.with_name(f"{path.stem}.1{path.suffix}")


def _head(data: bytes, limit: int) -> bytes:
    """The first whole lines of `data` within `limit` bytes (all of it when shorter)."""
    if len(data) <= limit:
        return data if data.endswith(b"\n") or not data else data + b"\n"
    cut = data.rfind(b"\n", 0, limit) + 1
    return data[:cut] if cut else data[:limit] + b"\n"


def _earlier(previous: Path) -> tuple[bytes, int]:
    """(the head kept by an earlier cut, the bytes cut so far counting the tail kept then, which the next cut
    replaces) from NAME.1.log; (b"", 0) when there is none."""
    try:
        with open(previous, "rb") as handle:
            data = handle.read(HEAD_BYTES + 4096)
            size = handle.seek(0, os.SEEK_END)
    except OSError:
        return b"", 0
    at = data.find(b"\n" + CUT_MARK) + 1 if not data.startswith(CUT_MARK) else 0
    if at <= 0 and not data.startswith(CUT_MARK):
        return b"", 0
    end = data.find(b"\n", at) + 1
    try:
        cut = int(data[at + len(CUT_MARK) : end].split(b" ", 1)[0])
    except ValueError:
        cut = 0
    return data[:at], cut + size - end


def cap_log(path: Path, cap: int, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> bool:
    """When the log at `path` is larger than `cap`, keep its head and tail in NAME.1.log and truncate it to
    zero (see the module docstring); returns True when it did. Never follows a link."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        size = os.fstat(fd).st_size
        if size <= cap:
            return False
        previous = previous_path(path)
        kept_head, cut_before = _earlier(previous)
        if not cut_before:
            kept_head = _head(os.pread(fd, head + 1, 0), head)
        start = max(len(kept_head) if not cut_before else 0, size - tail)
        last = os.pread(fd, size - start + 1, start - 1)[1:] if start > 0 else os.pread(fd, size, 0)
        if start > 0 and os.pread(fd, 1, start - 1) != b"\n" and b"\n" in last:
            last = last[last.find(b"\n") + 1 :]  # from a whole line
        cut = cut_before + size - len(last) - (0 if cut_before else len(kept_head))
        mark = CUT_MARK + b"%d bytes of output cut here; the newest output is in %s]\n" % (cut, path.name.encode())
        _replace(previous, kept_head + mark + last)
        os.ftruncate(fd, 0)
        return True
    finally:
        os.close(fd)


def _replace(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def tail_text(path: Path, offset: int, limit: int = 16384) -> str:
    """The last `limit` bytes of the log at `path` written after `offset`, as text. When the log was cut since
    (it is now shorter than `offset`), what it holds and the end of NAME.1.log before it."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            end = handle.seek(0, os.SEEK_END)
            cut = end < offset
            handle.seek(max(0 if cut else offset, end - limit))
            data = handle.read(limit)
    except OSError:
        return ""
    if cut and len(data) < limit:
        try:
            with open(previous_path(path), "rb") as handle:
                size = handle.seek(0, os.SEEK_END)
                want = limit - len(data)
                handle.seek(max(0, size - want))
                data = handle.read(want) + data
        except OSError:
            pass
    return data.decode("utf-8", errors="replace")


def cap_run_logs(run_dir: Path) -> list[str]:
    """Cap a run's train.log and supervisor.log; the names of those cut."""
    from yolotui.runs.layout import SUPERVISOR_LOG, TRAIN_LOG

    cut = []
    for name, cap in ((TRAIN_LOG, TRAIN_LOG_CAP), (SUPERVISOR_LOG, SUPERVISOR_LOG_CAP)):
        if cap_log(Path(run_dir) / name, cap):
            cut.append(name)
    return cut
