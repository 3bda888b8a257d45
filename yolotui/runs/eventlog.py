"""Bounded readers of a run's events (the layout: yolotui.runs.events and docs/long-runs.md).

Every reader here costs what it shows, not how long the run has trained: the newest events are read from the
end of each stream, every epoch's record from events.jsonl (which holds no batch events), a live run through
followers that read only what was appended. An old run folder (batch events inside events.jsonl) reads the
same way: its batch lines are skipped by a byte test, never parsed or kept, beyond the newest few.
"""

from __future__ import annotations

import os
from collections import deque
from pathlib import Path

from yolotui.runs.events import BATCHES_FILE, BATCHES_PREVIOUS, EVENTS_FILE, Event, parse_line, parse_lines
from yolotui.runs.tailread import tail_window

CHUNK = 1024 * 1024  # read size of a follower; a backlog never sits in memory whole
KEEP_BATCHES = 256  # batch events a follower hands over from a backlog (the newest)
_BATCH_MARK = b'"type":"batch"'


def is_batch_line(raw: bytes) -> bool:
    """True for a batch event's line as every yolotui writer writes it (compact JSON), without parsing it."""
    return _BATCH_MARK in raw[:80]


def tail_events(path, max_bytes: int = 64 * 1024) -> list[Event]:
    """The complete events in the last `max_bytes` of one stream file (the first partial line dropped)."""
    return parse_lines(tail_window(path, max_bytes)[0])[0]


def _by_time(events: list[Event]) -> list[Event]:
    """Events of both streams in the order they were written: by `ts`; of two written in the same millisecond,
    the one further on in training last (a batch of epoch k before the epoch event of k), else as read."""
    def key(event: Event) -> tuple[float, int]:
        ts, at = event.get("ts"), event.get("epoch")
        stamp = float(ts) if isinstance(ts, (int, float)) and not isinstance(ts, bool) else 0.0
        if not isinstance(at, int) or isinstance(at, bool):
            return stamp, -1
        return stamp, at + 1 if event.get("type") == "epoch" else at

    return sorted(events, key=key)


def recent_events(run_dir, max_bytes: int = 64 * 1024) -> list[Event]:
    """The newest events of both streams, oldest first: up to `max_bytes` of events.jsonl and of the batch
    segments each (the segment before the current one too when the current one is short)."""
    run_dir = Path(run_dir)
    events = tail_events(run_dir / EVENTS_FILE, max_bytes)
    batches = tail_events(run_dir / BATCHES_FILE, max_bytes)
    try:
        current = (run_dir / BATCHES_FILE).stat().st_size
    except OSError:
        current = 0
    if current < max_bytes:
        batches = tail_events(run_dir / BATCHES_PREVIOUS, max_bytes - current) + batches
    return _by_time(events + batches)


def history(path, only: str | None = None) -> list[Event]:
    """Every event of events.jsonl (only those of type `only` when given), read in chunks; batch lines (an old
    folder's) and lines of other types are skipped unparsed.

    Memory is O(epochs): the new layout's events.jsonl holds no batch events, an old one's are never kept.
    """
    mark = ('"type":"%s"' % only).encode() if only else None
    found: list[Event] = []
    try:
        with open(path, "rb") as handle:
            carry = b""
            while True:
                block = handle.read(CHUNK)
                if not block:
                    break
                lines = (carry + block).split(b"\n")
                carry = lines.pop()
                for raw in lines:
                    if is_batch_line(raw) or (mark is not None and mark not in raw):
                        continue
                    event = parse_line(raw)
                    if event is not None:
                        found.append(event)
    except OSError:
        return found
    return found


def epoch_events(path, before: int | None = None) -> list[Event]:
    """The `epoch` events of events.jsonl (those of epochs < `before` when given), in order."""
    return [e for e in history(path, only="epoch") if e.get("type") == "epoch" and isinstance(e.get("epoch"), int)
            and (before is None or e["epoch"] < before)]


class EventFollower:
    """Reads the events appended to one stream file since the last call, completing a torn line once its
    newline arrives. A replaced or truncated file (a rotation, a resume's rewind) is read again from its start
    and `reset` says so until the next poll. Of a backlog's batch events only the newest `keep_batches` are
    handed over (every other event is), so a first poll on a long run costs little memory."""

    def __init__(self, path, offset: int = 0, keep_batches: int | None = KEEP_BATCHES,
                 skip_partial: bool = False) -> None:
        self.path = Path(path)
        self.offset = offset
        self.keep_batches = keep_batches
        self.reset = False
        self.skip_partial = offset > 0 and skip_partial
        self._inode: int | None = None

    def poll(self) -> list[Event]:
        """Events completed since the previous poll (all of them on the first, batches capped)."""
        self.reset = False
        try:
            with open(self.path, "rb") as handle:
                stat = os.fstat(handle.fileno())
                if self._inode is not None and (stat.st_ino != self._inode or stat.st_size < self.offset):
                    self.offset, self.reset, self.skip_partial = 0, True, False
                self._inode = stat.st_ino
                handle.seek(self.offset)
                return self._read(handle)
        except OSError:
            return []

    def _read(self, handle) -> list[Event]:
        others: list[tuple[int, Event]] = []
        batches: deque = deque(maxlen=self.keep_batches)  # (sequence, raw line), parsed only if kept
        sequence, carry = 0, b""
        while True:
            block = handle.read(CHUNK)
            if not block:
                break
            data = carry + block
            end = data.rfind(b"\n") + 1
            carry = data[end:]
            self.offset += end
            lines = data[:end].split(b"\n")[:-1]
            if self.skip_partial and lines:
                lines, self.skip_partial = lines[1:], False  # began mid-line: the first piece is no event
            for raw in lines:
                sequence += 1
                if self.keep_batches is not None and is_batch_line(raw):
                    batches.append((sequence, raw))
                    continue
                event = parse_line(raw)
                if event is not None:
                    others.append((sequence, event))
        if not batches:
            return [event for _, event in others]
        kept = [(seq, parse_line(raw)) for seq, raw in batches]
        merged = sorted(others + [(seq, event) for seq, event in kept if event is not None], key=lambda x: x[0])
        return [event for _, event in merged]


class RunFollower:
    """Follows both streams of a run (events.jsonl and the rotated batches.jsonl); each poll returns the new
    events of both in time order. The batch stream starts at its tail (`batch_tail` bytes), the other at
    `offset` (0: its whole history, O(epochs))."""

    def __init__(self, run_dir, offset: int = 0, batch_tail: int = 64 * 1024,
                 keep_batches: int | None = KEEP_BATCHES) -> None:
        run_dir = Path(run_dir)
        self.events = EventFollower(run_dir / EVENTS_FILE, offset, keep_batches)
        try:
            size = (run_dir / BATCHES_FILE).stat().st_size
        except OSError:
            size = 0
        self.batches = EventFollower(run_dir / BATCHES_FILE, max(0, size - batch_tail), keep_batches,
                                     skip_partial=size > batch_tail > 0)
        # just rotated: the newest batches before it are in the previous segment
        self._earlier = tail_events(run_dir / BATCHES_PREVIOUS, batch_tail - size) if size < batch_tail else []

    @property
    def reset(self) -> bool:
        """True when the last poll found events.jsonl replaced or truncated (read again from its start)."""
        return self.events.reset

    def poll(self) -> list[Event]:
        """New events of both streams, in time order."""
        events = self.events.poll()
        batches = self.batches.poll()
        if self._earlier:
            batches, self._earlier = self._earlier[-(self.batches.keep_batches or len(self._earlier)):] + batches, []
        return _by_time(events + batches) if batches else events
