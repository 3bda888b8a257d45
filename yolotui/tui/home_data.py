"""What the home screen shows, read at bounded cost: one HomeRow per run, with its progress, ETA, backend and
mAP50-95 trend, and which run's processes sit on which GPU.

Called from the home screen's loader thread. Every file is read through the runs layer's helpers (summary,
status, run.yaml) or as a tail of fixed size: results.csv's last rows, events.jsonl's last events, never a
whole file. The widgets take these plain rows and a GPU sample and nothing else, so another source of rows
(another machine's runs) can feed the same widgets: a row's `host` names where it runs (None: this machine).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from yolotui.runs.eventlog import recent_events
from yolotui.runs.layout import EVENTS_JSONL, LIVE_STATES, RESULTS_CSV, STATUS_JSON
from yolotui.runs.summary import RunSummary
from yolotui.tui.sources import CheckpointFacts

RESULTS_TAIL_BYTES = 16 * 1024  # ~50 rows of the official 20-wide format: enough for a trend and mini charts
RESULTS_HEAD_BYTES = 4 * 1024  # the header line
EVENTS_TAIL_BYTES = 32 * 1024  # the latest batch (and, for a short epoch, epoch) events: the rates of an ETA
MAP_KEY = "metrics/mAP_0.5:0.95"
MIN_PACE_S = 0.5  # events closer than this say nothing of the pace (a replay, a test's fixture): no ETA


@dataclass
class HomeRow:
    """One run as the home screen shows it."""

    summary: RunSummary
    checkpoint: CheckpointFacts | None
    backend: str | None = None  # the backend's display name (Backend.label): engine, official, command ...
    map_trend: tuple[float, ...] = ()  # mAP50-95 of the latest finished epochs, oldest first
    fraction: float | None = None  # how much of the run is done, 0..1
    eta_s: float | None = None  # seconds left, for a live run whose pace is known
    pids: frozenset[int] = field(default_factory=frozenset)  # a live run's trainer process tree
    host: str | None = None  # where the run is (None: this machine)


@dataclass
class RowExtras:
    """The parts of a HomeRow read beyond the run's summary (cached per run while its files do not change)."""

    backend: str | None = None
    map_trend: tuple[float, ...] = ()
    fraction: float | None = None
    eta_s: float | None = None
    trainer_pid: int | None = None


def tail_results(path: Path, max_bytes: int = RESULTS_TAIL_BYTES) -> list[dict[str, float]]:
    """The complete rows in the last `max_bytes` of results.csv (header from its head), under the official
    names (ultralytics' too, epochs counted from 0); [] when it cannot be read."""
    from yolotui.runs.results import official_names

    try:
        with open(path, "rb") as handle:
            head = handle.read(RESULTS_HEAD_BYTES)
            size = handle.seek(0, os.SEEK_END)
            start = max(0, size - max_bytes)
            handle.seek(start)
            data = handle.read(size - start)
    except OSError:
        return []
    newline = head.find(b"\n")
    if newline < 0:
        return []
    names, offset = official_names([n.strip() for n in head[:newline].decode("ascii", "replace").split(",")])
    lines = data.split(b"\n")
    lines = lines[1:-1]  # the first may begin mid-row (or be the header); the last is '' or a torn row
    rows: list[dict[str, float]] = []
    for raw in lines:
        cells = raw.decode("ascii", "replace").split(",")
        if len(cells) != len(names):
            continue
        try:
            row = {name: float(cell) for name, cell in zip(names, cells)}
        except ValueError:
            continue  # the header (a small file), or a damaged row
        if offset and "epoch" in row:
            row["epoch"] += offset
        rows.append(row)
    return rows


def map_trend(rows: list[dict[str, float]], count: int = 24) -> tuple[float, ...]:
    """mAP50-95 of the last `count` rows."""
    return tuple(row[MAP_KEY] for row in rows[-count:] if MAP_KEY in row)


def progress(summary: RunSummary, events: list[dict]) -> tuple[float | None, float | None]:
    """(fraction of the run done, seconds left) from the summary and the newest events.

    The pace is the median interval between the newest epoch events when the tail holds two or more (validation
    and checkpoint included), else the batch rate of the epoch in progress (training only: an estimate)."""
    epochs = summary.epochs
    if not epochs:
        return None, None
    done = min(summary.epoch or 0, epochs)
    part = summary.batch / summary.batches if summary.batch is not None and summary.batches else 0.0
    fraction = min(1.0, (done + min(1.0, part)) / epochs)
    if summary.state not in LIVE_STATES or summary.state == "queued":
        return fraction, None
    epoch_s = _epoch_seconds(events)
    if epoch_s is None:
        batch_s = _batch_seconds(events)
        if batch_s is None or not summary.batches:
            return fraction, None
        epoch_s = batch_s * summary.batches
    return fraction, max(0.0, (1.0 - fraction) * epochs * epoch_s)


def _epoch_seconds(events: list[dict]) -> float | None:
    stamps = [e.get("ts") for e in events if e.get("type") == "epoch"]
    stamps = [float(t) for t in stamps if isinstance(t, (int, float)) and not isinstance(t, bool)]
    gaps = sorted(b - a for a, b in zip(stamps, stamps[1:]) if b - a >= MIN_PACE_S)[-5:]
    return gaps[len(gaps) // 2] if gaps else None


def _batch_seconds(events: list[dict]) -> float | None:
    """Seconds per batch between the first and the last batch event of the newest epoch in the tail."""
    batches = [e for e in events if e.get("type") == "batch" and isinstance(e.get("ts"), (int, float))
               and isinstance(e.get("batch"), int) and isinstance(e.get("epoch"), int)]
    if len(batches) < 2:
        return None
    last = batches[-1]
    same = [e for e in batches if e["epoch"] == last["epoch"]]
    first = same[0]
    if last["batch"] <= first["batch"] or last["ts"] - first["ts"] < MIN_PACE_S:
        return None
    return (last["ts"] - first["ts"]) / (last["batch"] - first["batch"])


_labels: dict[str, str] = {}


def backend_label(name: str | None) -> str | None:
    """The display name of the backend called `name` (its `label`), or None when it is unknown."""
    if not name:
        return None
    if name not in _labels:
        from yolotui.backends import get_backend

        try:
            backend = get_backend(name)
            _labels[name] = backend.label or backend.name
        except Exception:  # an unknown or broken backend: shown as its name, never a traceback
            _labels[name] = name
    return _labels[name]


def run_backend_name(run_dir: Path, status_backend: str | None) -> str | None:
    """run.yaml's `backend` (what a resume uses), else the one status.json names."""
    from yolotui.runs.runconfig import run_yaml_field

    named = run_yaml_field(run_dir, "backend")
    return named if isinstance(named, str) and named else status_backend


class ExtrasReader:
    """Reads each run's RowExtras, again only when one of its files changed (or, while live, every call)."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[tuple, RowExtras]] = {}

    def extras(self, summary: RunSummary) -> RowExtras:
        """The run's extras, from the cache when its files are as they were."""
        folder = Path(summary.path)
        key = (file_stamp(folder / STATUS_JSON), file_stamp(folder / RESULTS_CSV), file_stamp(folder / EVENTS_JSONL),
               summary.state, summary.epoch, summary.batch)
        cached = self._cache.get(summary.path)
        if cached is not None and cached[0] == key:
            return cached[1]
        from yolotui.runs.status import read_status

        status = read_status(folder) if summary.state in LIVE_STATES or cached is None else None
        extras = RowExtras()
        if status is not None:
            extras.backend = backend_label(run_backend_name(folder, status.backend))
            extras.trainer_pid = status.trainer_pid if summary.state in LIVE_STATES else None
        elif cached is not None:
            extras.backend = cached[1].backend
        extras.map_trend = map_trend(tail_results(folder / RESULTS_CSV))
        events = recent_events(folder, EVENTS_TAIL_BYTES) if summary.state in LIVE_STATES else []
        extras.fraction, extras.eta_s = progress(summary, events)
        self._cache[summary.path] = (key, extras)
        return extras


def file_stamp(path: Path) -> tuple[int, int] | None:
    """(mtime in ns, size) of `path`, None when it cannot be read: what says a cached reading is still good."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


def pid_owners(rows: list[HomeRow]) -> dict[int, str]:
    """Which run each live trainer process belongs to: {pid: run name}."""
    owners: dict[int, str] = {}
    for row in rows:
        for pid in row.pids:
            owners[pid] = row.summary.name
    return owners


def device_users(rows: list[HomeRow]) -> dict[int, list[str]]:
    """{GPU index: names of the live local runs that asked for it}, from each run's device string."""
    from yolotui.devices import split_device
    from yolotui.errors import UserError

    users: dict[int, list[str]] = {}
    for row in rows:
        if row.summary.slurm or row.host:  # on another machine: not one of these GPUs
            continue
        try:
            indices = split_device(row.summary.device or "cpu")
        except UserError:
            continue
        for gpu in indices or []:
            users.setdefault(gpu, []).append(row.summary.name)
    return users
