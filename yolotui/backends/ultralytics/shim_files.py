"""The ultralytics shim's own file rules: the results.csv rows and events a resume drops (ultralytics counts its
epoch column from 1), checkpoint writes made atomic, and the stand-in for a best.pt a save-now must not write.

Standard library only (Python >= 3.8): loaded by path by shim.py in the trainer's interpreter, where yolotui
may not be importable. The writes themselves are the shim kit's (yolotui/backends/shimkit.py).
"""

from __future__ import annotations

import importlib
import sys

# The kit shim.py loaded by path (it runs without yolotui); in yolotui's own process (its tests), the package's.
kit = sys.modules.get("yolotui_shimkit") or importlib.import_module("yolotui.backends.shimkit")


def drop_results_after(path, epochs_done):
    """Rewrite ultralytics' results.csv without rows past `epochs_done` (its epoch column counts from 1)
    and without a torn last row; returns how many rows were dropped."""
    return kit.drop_rows(path, lambda at: at > epochs_done)


def drop_events_from(path, epoch):
    """Drop batch/epoch/stop events of 0-based `epoch` and later, checkpoints past it (their epoch counts
    epochs done) and done events; returns how many were dropped. (A kept stop event would make the supervisor
    take the new attempt for a stopped one.) Bounded by the tail past the checkpoint."""
    def later(event):
        kind = event.get("type")
        at = int(event.get("epoch", 0) or 0)
        return kind in ("batch", "epoch", "stop") and at >= epoch or kind == "checkpoint" and at > epoch \
            or kind == "done"

    return kit.drop_events(path, later)


def atomic_path_class(base):
    """A subclass of the pathlib class `base` whose write_bytes is atomic (what ultralytics saves with)."""

    class AtomicPath(base):
        def write_bytes(self, data):
            kit.atomic_write(self, data)
            return len(data)

    return AtomicPath


class Discard:
    """Stands in for best.pt during a save-now: ultralytics' write of it goes nowhere."""

    def write_bytes(self, data):
        return len(data)

    def exists(self):
        return False
