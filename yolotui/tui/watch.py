"""Change notification for run folders: watchfiles (inotify and friends), with a slow poll as the fallback.

`watch_changes` is awaited inside an async Textual worker; it calls `on_change()` once per batch of file
changes and returns when the worker is cancelled. If the OS watcher cannot start (no such folder, inotify
limits), it returns False and the caller relies on its slow poll.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

WATCH_DEBOUNCE_MS = 300  # longest wait to group a burst of changes
WATCH_STEP_MS = 20  # quiet time that ends a group: keeps event-to-screen latency low


async def watch_changes(paths: Iterable[Path], on_change: Callable[[], None]) -> bool:
    """Call `on_change` after every batch of changes under `paths` (existing folders only)."""
    existing = [str(p) for p in paths if os.path.isdir(p)]
    if not existing:
        return False
    try:
        from watchfiles import awatch

        async for _changes in awatch(*existing, debounce=WATCH_DEBOUNCE_MS, step=WATCH_STEP_MS,
                                     ignore_permission_denied=True):
            on_change()
    except (OSError, RuntimeError, ImportError):
        return False
    return True
