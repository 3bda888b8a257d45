"""One line of facts per run (state, epoch x/y, best mAP, checkpoint age ...) for `yolotui ls` and the TUI.

Cheap enough for hundreds of runs: reads status.json, results.csv and only the tail of events.jsonl.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from yolotui.runs import index
from yolotui.runs.events import Event, parse_lines
from yolotui.runs.layout import BEST_PT, EVENTS_JSONL, LAST_PT, RESULTS_CSV, WEIGHTS_DIR
from yolotui.runs.results import read_rows
from yolotui.runs.status import effective_state, read_status

TAIL_BYTES = 64 * 1024


@dataclass
class RunSummary:
    """What the runs table shows for one run; None where the run has not said yet."""

    name: str
    path: str
    state: str
    attempt: int = 0
    epoch: int | None = None  # epochs finished
    epochs: int | None = None  # epochs planned
    best_map: float | None = None  # best mAP50-95 so far
    checkpoint_age: float | None = None  # seconds since last.pt was written
    device: str | None = None
    started: float | None = None
    updated: float | None = None
    failure_class: str | None = None
    message: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form."""
        return asdict(self)


def tail_events(path: Path, max_bytes: int = TAIL_BYTES) -> list[Event]:
    """The complete events in the last `max_bytes` of an events file (the first partial line dropped)."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            start = max(0, size - max_bytes)
            handle.seek(start)
            data = handle.read()
    except OSError:
        return []
    if start > 0:
        data = data[data.find(b"\n") + 1 :]
    return parse_lines(data)[0]


def summarize(run_dir: Path, name: str | None = None) -> RunSummary:
    """Summarise one run directory from its files."""
    run_dir = Path(run_dir)
    status = read_status(run_dir)
    summary = RunSummary(name=name or (status.name if status and status.name else run_dir.name),
                         path=str(run_dir), state=effective_state(run_dir, status))
    if status is not None:
        summary.attempt = status.attempt
        summary.device = status.device
        summary.started = status.started
        summary.updated = status.updated
        summary.failure_class = status.failure_class
        summary.message = status.message
    rows = read_rows(run_dir / RESULTS_CSV)
    if rows:
        summary.epoch = int(rows[-1]["epoch"]) + 1
        maps = [r["metrics/mAP_0.5:0.95"] for r in rows if "metrics/mAP_0.5:0.95" in r]
        summary.best_map = max(maps) if maps else None
    for event in reversed(tail_events(run_dir / EVENTS_JSONL)):
        if "epochs" in event and summary.epochs is None:
            summary.epochs = int(event["epochs"])
        if event.get("type") == "done" and summary.epoch is None:
            summary.epoch = summary.epochs
        if summary.epochs is not None:
            break
    for ckpt in (LAST_PT, BEST_PT):
        try:
            mtime = (run_dir / WEIGHTS_DIR / ckpt).stat().st_mtime
        except OSError:
            continue
        summary.checkpoint_age = time.time() - mtime
        break
    return summary


def summarize_all() -> list[RunSummary]:
    """Summaries of every indexed run, newest first."""
    return [summarize(Path(entry.path), entry.name) for entry in index.entries()]
