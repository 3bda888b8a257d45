"""A run's events: the one writer and the bounded rewind of a resume (the contract: docs/long-runs.md).

Two streams (docs/architecture.md, "Event types", lists the types), one JSON object a line, each event with `ts` (unix seconds), `type` and `attempt`:

- events.jsonl: every event but `batch` (start, epoch, checkpoint, done, stop, error, warning, remedy ...),
  appended for the whole run: O(epochs) lines, so a reader that needs every epoch reads only epochs;
- batches.jsonl: the throttled `batch` events, a segment rotated to batches.1.jsonl (the one before it
  dropped) once it reaches SEGMENT_BYTES: the newest batches are always there, the disk cost is bounded.

Old run folders (every event in events.jsonl) are read by the same readers (yolotui.runs.eventlog).

Standard library only and no yolotui import at module level: the trainer shims load this file by path in an
interpreter without yolotui (yolotui/backends/shimkit.py), so the engine and both shims share this writer.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

Event = dict  # one parsed event: str keys, JSON values (typing is not imported: `yolotui ls` stays fast)

EVENTS_FILE = "events.jsonl"
BATCHES_FILE = "batches.jsonl"
BATCHES_PREVIOUS = "batches.1.jsonl"
SEGMENT_BYTES = 4 * 1024 * 1024  # a batch segment's size before rotation (two are kept: <= 8 MiB a run)
PROGRESS_TYPES = frozenset({"batch", "epoch", "checkpoint"})  # events that carry the training position
REWIND_BLOCK = 64 * 1024
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # run files are never written through a symlink


def _append_plain(path: str, data: bytes) -> int:
    """Append `data` with one write on an O_APPEND descriptor; returns the file's size after it."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW, 0o644)
    try:
        os.write(fd, data)
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def _append_checked(path: str, data: bytes) -> int:
    """As _append_plain, through yolotui's own opener (refuses links and odd files with one line)."""
    from yolotui.runs.atomic import open_append

    fd = open_append(path)
    try:
        os.write(fd, data)
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


class EventWriter:
    """Appends a run's events: `batch` to the rotated batches.jsonl, the others to events.jsonl (`path`).

    One whole line per write, so a kill tears at most one line. `on_error`, when given, is told the failure of a
    write instead of it raising (a shim: training goes on, the event is lost, the log says so).
    """

    def __init__(self, path, attempt: int = 1, on_error: Callable[[str], None] | None = None,
                 segment_bytes: int = SEGMENT_BYTES) -> None:
        self.path = os.fspath(path)
        folder = os.path.dirname(self.path) or "."
        self.batches_path = os.path.join(folder, BATCHES_FILE)
        self.previous_path = os.path.join(folder, BATCHES_PREVIOUS)
        self.attempt = attempt
        self.on_error = on_error
        self.segment_bytes = segment_bytes
        self._append = _append_checked if __name__.startswith("yolotui.") else _append_plain
        os.makedirs(folder, exist_ok=True)

    def emit(self, type_: str, **fields: object) -> Event:
        """Append one event of `type_` with `fields`; returns the event written."""
        event: Event = {"ts": round(time.time(), 3), "type": type_, "attempt": self.attempt}
        event.update(fields)
        line = (json.dumps(event, default=_jsonable, allow_nan=True, separators=(",", ":")) + "\n").encode("utf-8")
        target = self.batches_path if type_ == "batch" else self.path
        try:
            size = self._append(target, line)
            if target == self.batches_path and size >= self.segment_bytes:
                os.replace(self.batches_path, self.previous_path)
        except OSError as exc:
            if self.on_error is None:
                raise
            self.on_error("cannot write %s: %s" % (target, exc))
        return event


def _jsonable(value: object) -> object:
    """Turn values json cannot encode (paths, numpy scalars, tensors) into plain ones."""
    for name in ("item", "tolist"):
        method = getattr(value, name, None)
        if callable(method):
            try:
                return method()
            except (TypeError, ValueError, RuntimeError):
                pass
    return str(value)


def parse_lines(data: bytes) -> tuple[list[Event], int]:
    """Parse whole lines of `data`; return the events and how many bytes were consumed.

    A last line without its newline is not consumed (it may still be being written); a whole line that
    is not valid JSON is skipped.
    """
    events: list[Event] = []
    consumed = data.rfind(b"\n") + 1
    for raw in data[:consumed].splitlines():
        event = parse_line(raw)
        if event is not None:
            events.append(event)
    return events, consumed


def parse_line(raw: bytes) -> Event | None:
    """One line's event; None for a blank, garbage or non-object line."""
    if not raw.strip():
        return None
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):  # garbage, or nested too deep to parse
        return None
    return obj if isinstance(obj, dict) else None


def read_events(path) -> list[Event]:
    """All complete events in one small file (tests, a segment); [] when it does not exist.

    Never call it on a whole run's stream: yolotui.runs.eventlog has the bounded readers.
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return []
    return parse_lines(data)[0]


# --- the rewind of a resume ---------------------------------------------------------------------------------

def lines_backwards(handle, end: int, block: int = REWIND_BLOCK):
    """Yield (offset, line without its newline) of a binary file's lines before `end`, last first."""
    carry, pos = b"", end
    while pos > 0:
        start = max(0, pos - block)
        handle.seek(start)
        data = handle.read(pos - start) + carry
        pos = start
        lines = data.split(b"\n")
        carry = lines.pop(0)  # maybe a line begun in the block before
        offset = start + len(carry) + 1
        offsets = []
        for raw in lines:
            offsets.append(offset)
            offset += len(raw) + 1
        for offset, raw in zip(reversed(offsets), reversed(lines)):
            yield offset, raw
    if carry or end > 0:
        yield 0, carry


def rewind(path, later: Callable[[Event], bool], opener: Callable = open) -> tuple[int, bool]:
    """Drop the events `later(event)` says come after a checkpoint from the end of one stream file.

    Events are appended in training order, so the scan runs backwards from the end and stops at the first
    progress event (batch, epoch, checkpoint) that is not later: the bytes read and rewritten are the tail past
    the checkpoint, not the history. The file is cut there and the tail's events that are not later (start,
    warning, error, remedy ...) are appended again in their order. Returns (events dropped, whether a kept
    progress event was found: False means the whole file was past the checkpoint).
    """
    path = os.fspath(path)
    try:
        handle = opener(path, "rb")
    except OSError:
        return 0, False
    later = _guarded(later)
    tail, cut, found = [], 0, False
    with handle:
        size = handle.seek(0, os.SEEK_END)
        for offset, raw in lines_backwards(handle, size):
            event = parse_line(raw)
            if event is not None and event.get("type") in PROGRESS_TYPES and not later(event):
                cut, found = offset + len(raw) + 1, True
                break
            tail.append((raw, event))
    if cut >= size:
        return 0, found
    kept, dropped = [], 0
    for raw, event in reversed(tail):
        if event is None:
            dropped += 1 if raw.strip() else 0  # garbage or a torn line
        elif later(event):
            dropped += 1
        else:
            kept.append(raw)
    fd = os.open(path, os.O_WRONLY | _NOFOLLOW)
    try:
        os.ftruncate(fd, cut)
        if kept:
            os.lseek(fd, 0, os.SEEK_END)
            os.write(fd, b"".join(raw + b"\n" for raw in kept))
        os.fsync(fd)
    finally:
        os.close(fd)
    return dropped, found


def _guarded(later: Callable[[Event], bool]) -> Callable[[Event], bool]:
    """`later` that calls an event with a malformed field not later (kept, as written)."""
    def check(event: Event) -> bool:
        try:
            return bool(later(event))
        except (TypeError, ValueError, AttributeError):
            return False

    return check


def rewind_run(events_path, later: Callable[[Event], bool], opener: Callable = open) -> int:
    """Rewind a run's streams (events.jsonl, then batches.jsonl and, if all of it was later, batches.1.jsonl)
    past a checkpoint (see `rewind`); returns how many events were dropped. Old folders have one stream only."""
    events_path = os.fspath(events_path)
    folder = os.path.dirname(events_path) or "."
    dropped = rewind(events_path, later, opener)[0]
    for name in (BATCHES_FILE, BATCHES_PREVIOUS):
        count, found = rewind(os.path.join(folder, name), later, opener)
        dropped += count
        if found:
            break
    return dropped
