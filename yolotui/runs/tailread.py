"""The last bytes of a file that grows, cut at a line start: one bounded read for every tail view.

The events readers (runs/eventlog.py, `yolotui watch`) and the preview pane's train.log tail read only a
file's last window, so their cost stays flat however long the run has written.
"""

from __future__ import annotations

import os


def tail_window(path, max_bytes: int) -> tuple[bytes, int]:
    """The last `max_bytes` of `path` from its first line start on (the whole window when no newline is in it),
    and the file offset where those bytes begin; (b"", 0) when the file cannot be read."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            start = max(0, size - max_bytes - 1)  # one byte more: is the window's first byte a line start?
            handle.seek(start)
            data = handle.read(size - start)
    except OSError:
        return b"", 0
    if start > 0 or len(data) > max_bytes:
        skip = data.find(b"\n") + 1 or 1  # no newline: the window is one partial line; keep it
        data, start = data[skip:], start + skip
    return data, start
