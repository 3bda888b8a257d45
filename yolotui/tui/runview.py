"""Rebuild everything the dashboard shows from a run directory, incrementally (no Textual here).

`RunReader.refresh()` is called from a thread worker; it reads only what was appended since the last call
(events through RunFollower: every epoch, the newest batches, train.log from its last offset) and re-reads results.csv, status.json and the
checkpoints only when they changed. It returns a `RunView`, a plain snapshot that the UI renders.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yolotui.logtext import LogCleaner
from yolotui.runs.eventlog import RunFollower
from yolotui.runs.events import Event
from yolotui.runs.layout import (
    BEST_PT,
    LAST_PT,
    RESULTS_CSV,
    STATUS_JSON,
    TRAIN_LOG,
    WEIGHTS_DIR,
)
from yolotui.runs.results import read_rows
from yolotui.runs.status import RunStatus, effective_state, read_status, slurm_job_of
from yolotui.tui.sources import CheckpointFacts, diagnose

LOG_TAIL_BYTES = 32 * 1024
LOG_LINES = 300
RATE_READINGS = 30  # the speed shown: the median of the epoch's latest batch events' imgs_per_s


@dataclass
class EpochPoint:
    """One finished epoch: train losses and validation metrics (None where not reported)."""

    epoch: int
    box: float | None = None
    cls: float | None = None
    dfl: float | None = None
    precision: float | None = None
    recall: float | None = None
    map50: float | None = None
    map: float | None = None
    lr: float | None = None  # the learning rate at the epoch's end (the first parameter group's)
    imgs_per_s: float | None = None  # the epoch's training speed (the median of its batch events' rates)


@dataclass
class RunView:
    """A snapshot of one run as the dashboard shows it."""

    run_dir: str
    name: str
    state: str
    status: RunStatus | None = None
    epoch: int | None = None  # 0-based epoch in progress (or the last one seen)
    epochs: int | None = None
    batch: int | None = None  # batches done in `epoch`
    batches: int | None = None
    imgs_per_s: float | None = None
    batches_per_s: float | None = None
    epoch_seconds: float | None = None  # typical wall time of one epoch, validation and checkpoint included
    # (median of the last five intervals between epoch events; the trainer's own `seconds` leaves validation out)
    finished_epochs: int = 0
    points: list[EpochPoint] = field(default_factory=list)
    checkpoints: list[CheckpointFacts] = field(default_factory=list)
    log_lines: list[str] = field(default_factory=list)
    new_log_lines: list[str] = field(default_factory=list)
    log_reset: bool = False
    last_problem: str | None = None  # the latest warning/error event, one line
    done: bool = False
    problems: list[str] = field(default_factory=list)  # files that could not be read
    slurm: dict | None = None  # a SLURM run: job_id, state, reason, nodes, time_left (yolotui.placement.slurm)
    loop: dict | None = None  # the last epoch's loop timings: data wait vs compute (engine/train/loop_timing.py)

    @property
    def attempt(self) -> int:
        """The supervisor's attempt number (0 before the first)."""
        return self.status.attempt if self.status else 0

    @property
    def validating(self) -> bool:
        """Every batch of the epoch in progress is done and its epoch event has not come: the trainer validates
        (and saves the checkpoint)."""
        return (self.epoch is not None and self.batch is not None and bool(self.batches)
                and self.batch >= self.batches and self.finished_epochs <= self.epoch and not self.done)

    def epoch_fraction(self) -> float | None:
        """How much of the current epoch is done, 0..1."""
        if self.batch is None or not self.batches:
            return None
        return min(1.0, max(0.0, self.batch / self.batches))

    def overall_fraction(self) -> float | None:
        """How much of the whole run is done, 0..1."""
        if not self.epochs:
            return None
        if self.done or self.finished_epochs >= self.epochs:
            return 1.0
        part = self.epoch_fraction() if self.epoch is not None and self.epoch >= self.finished_epochs else 0.0
        return min(1.0, (self.finished_epochs + (part or 0.0)) / self.epochs)

    def epoch_eta(self) -> float | None:
        """Seconds left in the current epoch, from the batch rate."""
        if self.batch is None or not self.batches:
            return None
        if self.batches_per_s:
            return max(0.0, (self.batches - self.batch) / self.batches_per_s)
        if self.epoch_seconds:
            return max(0.0, (1.0 - self.batch / self.batches) * self.epoch_seconds)
        return None

    def overall_eta(self) -> float | None:
        """Seconds left in the run: the rest of this epoch plus the remaining epochs at the mean epoch time."""
        if not self.epochs:
            return None
        per_epoch = self.epoch_seconds
        if per_epoch is None and self.batches and self.batches_per_s:
            per_epoch = self.batches / self.batches_per_s
        if per_epoch is None:
            return None
        fraction = self.overall_fraction() or 0.0
        return max(0.0, (1.0 - fraction) * self.epochs * per_epoch)


class RunReader:
    """Follows one run directory; each `refresh()` returns an up-to-date RunView."""

    def __init__(self, run_dir: Path, name: str | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.name = name
        self.events = RunFollower(self.run_dir)
        self._event_points: dict[int, EpochPoint] = {}
        self._epoch_seconds: list[float] = []
        self._results_key: tuple[int, int] | None = None
        self._result_points: dict[int, EpochPoint] = {}
        self._ckpt_keys: dict[str, tuple[float, int] | None] = {}
        self._ckpt_facts: dict[str, CheckpointFacts] = {}
        self._log_offset: int | None = None
        self._log_inode: int | None = None
        self._log_lines: deque[str] = deque(maxlen=LOG_LINES)
        self._log_cleaner = LogCleaner()
        self._rate_mark: tuple[float, int, int] | None = None  # (ts, epoch, batch) at the start of the rate window
        self._wall_mark: float | None = None  # ts of the previous epoch event (or start) of this attempt
        self._rates: list[float] = []  # imgs_per_s of the epoch in progress's batch events
        self._rates_epoch: int | None = None
        self._last_lr: float | None = None  # the newest batch event's learning rate
        self.view = RunView(str(self.run_dir), name or self.run_dir.name, "unknown")

    def refresh(self) -> RunView:
        """Read what changed since the last call; never raises for a bad file (it lands in `problems`)."""
        view = self.view
        view.problems = []
        try:
            status = read_status(self.run_dir)
        except Exception as exc:  # an unexpected shape in status.json
            status = None
            view.problems.append(f"status.json: {exc}")
        if status is None and (self.run_dir / STATUS_JSON).exists():
            view.problems.append("status.json unreadable (the supervisor rewrites it)")
        view.status = status
        view.state = effective_state(self.run_dir, status)
        job = slurm_job_of(status)
        if job:
            from yolotui.runs.slurm_state import describe

            view.slurm = describe(job)  # squeue, bounded and cached (this runs in a worker thread)
        view.name = self.name or (status.name if status and status.name else self.run_dir.name)
        self._read_events(view)
        self._read_results(view)
        merged = {**self._event_points, **self._result_points}
        for epoch, point in self._result_points.items():  # results.csv has no speed: the epoch event's
            seen = self._event_points.get(epoch)
            if seen is not None and point.imgs_per_s is None:
                point.imgs_per_s = seen.imgs_per_s
        view.points = [merged[k] for k in sorted(merged)]
        view.finished_epochs = max(view.finished_epochs, len(view.points))
        if self._epoch_seconds:
            # Median of the last five: the first epoch (start-up, label check, cold caches) would skew a mean.
            recent = sorted(self._epoch_seconds[-5:])
            view.epoch_seconds = recent[len(recent) // 2]
        self._read_checkpoints(view)
        self._read_log(view)
        return view

    # -- events -------------------------------------------------------------------------------------------
    def _read_events(self, view: RunView) -> None:
        events = self.events.poll()
        if self.events.reset:  # events.jsonl rewound by a resume: rebuilt from its start
            self._event_points.clear()
            self._epoch_seconds.clear()
            self._wall_mark = None
            view.finished_epochs = 0
        for event in events:
            try:
                self._apply(view, event)
            except (TypeError, ValueError, KeyError, AttributeError):
                continue  # one malformed event never hides the others

    def _apply(self, view: RunView, event: Event) -> None:
        kind = event.get("type")
        if "epochs" in event and event["epochs"] is not None:
            view.epochs = int(event["epochs"])
        if kind == "batch":
            # `batch` counts the batches done (the trainer and the official shim send i + 1)
            epoch, batch = int(event["epoch"]), int(event["batch"])
            view.epoch = epoch
            view.batch = batch
            view.batches = int(event["batches"]) if event.get("batches") is not None else None
            if view.batches is not None:
                view.batch = min(view.batch, view.batches)
            if event.get("imgs_per_s") is not None:
                # The median of this epoch's readings: its first event counts the loader's start-up and its last
                # one a short, often partial batch; neither is the rate the run trains at (and the last one is
                # what a reattach during validation would otherwise show).
                if self._rates_epoch != epoch:
                    self._rates_epoch, self._rates = epoch, []
                self._rates.append(float(event["imgs_per_s"]))
                recent = sorted(self._rates[-RATE_READINGS:])
                view.imgs_per_s = recent[len(recent) // 2]
            self._update_rate(view, float(event.get("ts") or 0.0), epoch, batch)
            lr = event.get("lr")
            self._last_lr = _num(lr[0] if isinstance(lr, list) and lr else lr)
        elif kind == "epoch":
            epoch = int(event["epoch"])
            losses = event.get("losses") or {}
            metrics = event.get("metrics") or {}
            self._event_points[epoch] = EpochPoint(
                epoch,
                _num(losses.get("box")), _num(losses.get("cls")), _num(losses.get("dfl")),
                _num(metrics.get("P")), _num(metrics.get("R")),
                _num(metrics.get("mAP50")), _num(metrics.get("mAP50-95")),
                lr=self._last_lr,
                imgs_per_s=view.imgs_per_s if self._rates_epoch == epoch else None,
            )
            view.finished_epochs = max(view.finished_epochs, epoch + 1)
            view.loop = event["loop"] if isinstance(event.get("loop"), dict) else view.loop
            ts, trained = _num(event.get("ts")), _num(event.get("seconds"))
            wall = ts - self._wall_mark if ts is not None and self._wall_mark is not None else None
            # Wall time includes validation and the checkpoint; it is never less than the training alone.
            per_epoch = max(v for v in (wall, trained) if v is not None) if wall or trained else None
            if per_epoch is not None and per_epoch > 0:
                self._epoch_seconds.append(per_epoch)
            self._wall_mark = ts
            if view.epoch is None or view.epoch <= epoch:
                view.epoch, view.batch = epoch, view.batches
        elif kind == "start":
            self._rate_mark = None
            self._rates_epoch, self._rates = None, []  # a new attempt may run at another batch size or device
            self._wall_mark = _num(event.get("ts"))
            view.last_problem = None
        elif kind in ("warning", "error"):
            view.last_problem = f"{kind}: {event.get('kind') or ''} {event.get('message') or ''}".strip()
        elif kind == "done":
            view.done = True

    def _update_rate(self, view: RunView, ts: float, epoch: int, batch: int) -> None:
        mark = self._rate_mark
        if mark is None or mark[1] != epoch or batch < mark[2]:
            self._rate_mark = (ts, epoch, batch)
            return
        elapsed = ts - mark[0]
        if elapsed > 0 and batch > mark[2]:
            view.batches_per_s = (batch - mark[2]) / elapsed

    # -- results.csv --------------------------------------------------------------------------------------
    def _read_results(self, view: RunView) -> None:
        path = self.run_dir / RESULTS_CSV
        try:
            stat = path.stat()
        except OSError:
            self._result_points = {}
            return
        key = (stat.st_mtime_ns, stat.st_size)
        if key == self._results_key:
            return
        self._results_key = key
        points: dict[int, EpochPoint] = {}
        for row in read_rows(path):
            if "epoch" not in row:
                view.problems.append("results.csv: no epoch column")
                break
            epoch = int(row["epoch"])
            points[epoch] = EpochPoint(
                epoch,
                row.get("train/box_loss"), row.get("train/cls_loss"), row.get("train/dfl_loss"),
                row.get("metrics/precision"), row.get("metrics/recall"),
                row.get("metrics/mAP_0.5"), row.get("metrics/mAP_0.5:0.95"), lr=row.get("x/lr0"),
            )
        self._result_points = points

    # -- checkpoints --------------------------------------------------------------------------------------
    def _read_checkpoints(self, view: RunView) -> None:
        facts: list[CheckpointFacts] = []
        for name in (LAST_PT, BEST_PT):
            path = self.run_dir / WEIGHTS_DIR / name
            try:
                stat = path.stat()
                key: tuple[float, int] | None = (stat.st_mtime, stat.st_size)
            except OSError:
                key = None
            if name not in self._ckpt_facts or self._ckpt_keys.get(name) != key:
                self._ckpt_keys[name] = key
                self._ckpt_facts[name] = diagnose(path, view.epochs)
            facts.append(self._ckpt_facts[name])
        view.checkpoints = facts

    # -- train.log ----------------------------------------------------------------------------------------
    def _read_log(self, view: RunView) -> None:
        view.new_log_lines = []
        view.log_reset = False
        path = self.run_dir / TRAIN_LOG
        try:
            with open(path, "rb") as handle:
                stat = os.fstat(handle.fileno())
                if self._log_offset is not None and stat.st_ino == self._log_inode and stat.st_size < self._log_offset:
                    self._log_offset = 0  # cut by the supervisor (runs/logcap.py): the lines shown stay
                if self._log_offset is None or stat.st_ino != self._log_inode:
                    start = max(0, stat.st_size - LOG_TAIL_BYTES)
                    self._log_lines.clear()
                    self._log_cleaner = LogCleaner()
                    view.log_reset = True
                    handle.seek(start)
                    data = handle.read()
                    if start > 0:
                        data = data[data.find(b"\n") + 1 :]
                        start = stat.st_size - len(data)
                    self._log_offset = start
                else:
                    handle.seek(self._log_offset)
                    data = handle.read()
                self._log_inode = stat.st_ino
        except OSError:
            view.log_lines = list(self._log_lines)
            return
        end = data.rfind(b"\n") + 1  # a line still being written waits for its newline
        self._log_offset = (self._log_offset or 0) + end
        text = data[:end].decode("utf-8", errors="replace")
        # progress bars: each line's final state, not every \r redraw; repeated tracebacks collapsed
        lines = self._log_cleaner.feed(text.split("\n")[:-1])
        self._log_lines.extend(lines)
        view.new_log_lines = lines[-LOG_LINES:]
        view.log_lines = list(self._log_lines)


def _num(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None
