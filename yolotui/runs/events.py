"""events.jsonl: one JSON object a line, appended by the trainer; readers skip a torn last line.

Every event has `ts` (unix seconds), `type` and `attempt`; docs/architecture.md, "Event types", lists them.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

Event = dict  # one parsed event: str keys, JSON values (typing is not imported: `yolotui ls` stays fast)


class EventWriter:
    """Appends events to a run's events.jsonl, one whole line per write so a kill tears at most one line."""

    def __init__(self, path: Path, attempt: int = 1) -> None:
        self.path = Path(path)
        self.attempt = attempt
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def emit(self, type_: str, **fields: object) -> Event:
        """Append one event of `type_` with `fields`; returns the event written."""
        event: Event = {"ts": round(time.time(), 3), "type": type_, "attempt": self.attempt, **fields}
        line = json.dumps(event, default=_jsonable, allow_nan=True, separators=(",", ":")) + "\n"
        from yolotui.runs.atomic import append_bytes

        append_bytes(self.path, line.encode("utf-8"))
        return event


def _jsonable(value: object) -> object:
    """Turn values json cannot encode (paths, numpy scalars, tensors of one item) into plain ones."""
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return item()
        except (TypeError, ValueError):
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
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError):  # garbage, or nested too deep to parse
            continue
        if isinstance(obj, dict):
            events.append(obj)
    return events, consumed


def read_events(path: Path) -> list[Event]:
    """All complete events in `path`; [] when the file does not exist."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return []
    return parse_lines(data)[0]


class EventFollower:
    """Reads the events appended since the last call, completing a torn line once its newline arrives."""

    def __init__(self, path: Path, offset: int = 0) -> None:
        self.path = Path(path)
        self.offset = offset
        self._inode: int | None = None

    def poll(self) -> list[Event]:
        """Events completed since the previous poll (all of them on the first)."""
        try:
            with open(self.path, "rb") as handle:
                stat = os.fstat(handle.fileno())
                if self._inode is not None and (stat.st_ino != self._inode or stat.st_size < self.offset):
                    self.offset = 0  # the file was replaced or truncated (a resume dropped events)
                self._inode = stat.st_ino
                handle.seek(self.offset)
                data = handle.read()
        except OSError:
            return []
        events, consumed = parse_lines(data)
        self.offset += consumed
        return events

    def follow(self, interval: float = 0.2, stop: Callable[[], bool] | None = None) -> Iterator[Event]:
        """Yield events as they arrive until `stop()` returns true (forever when `stop` is None)."""
        while stop is None or not stop():
            batch = self.poll()
            yield from batch
            if not batch:
                time.sleep(interval)
