"""The trainer's side of the experiment trackers: open the ones run.yaml asks for, feed them, never let them fail
the run.

The trainer calls four hooks (all no-ops on ranks other than 0, and when no tracker is on):
`open_trackers(trainer)` after its start event, `hub.batch(...)` every training batch (only every N-th reaches
TensorBoard), `hub.epoch(event)` once an epoch's checkpoint is written, `hub.finish(best, last)` at the end,
and `close_trackers(trainer)` whatever way the process ends.

Each tracker runs behind a guard: any exception it raises becomes a `warning` event of kind `tracker` (and a
count in run.yaml's tracker_runs for `status`), and the tracker is opened again at the next epoch, catching up
with every epoch it missed (from events.jsonl and this process's epochs), so a server that was down for an
hour loses nothing. A missing package is said once and not retried. Network trackers (MLflow, W&B) work on
their own daemon thread, so a slow or unreachable server never holds a training step; at the end the trainer
waits for them a bounded time (FINISH_WAIT_S).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from yolotui.engine.trackers.base import (
    FAILED,
    FINISHED,
    STOPPED,
    MissingPackage,
    Tracker,
    TrackerContext,
)
from yolotui.runs.trackers import WARNING_KIND, read_records, read_settings

LOG = logging.getLogger("yolotui.trainer")
FINISH_WAIT_S = 300.0  # at the end, how long the trainer waits for trackers to send artefacts and close
CLOSE_WAIT_S = 30.0  # after a stop or a failure
MESSAGE_CHARS = 300


def make_tracker(name: str) -> Tracker:
    """The tracker called `name` (its library is imported only when it opens)."""
    if name == "tensorboard":
        from yolotui.engine.trackers.tensorboard import TensorBoardTracker

        return TensorBoardTracker()
    if name == "mlflow":
        from yolotui.engine.trackers.mlflow_tracker import MlflowTracker

        return MlflowTracker()
    if name == "wandb":
        from yolotui.engine.trackers.wandb_tracker import WandbTracker

        return WandbTracker()
    raise ValueError(f"unknown tracker {name!r}")


def one_line(exc: BaseException) -> str:
    """An exception as one short line: its type and the first line of its message."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    line = f"{type(exc).__name__}: {text}" if text and not isinstance(exc, MissingPackage) else (text or type(exc).__name__)
    return line[:MESSAGE_CHARS]


class _Runner:
    """One tracker, its state (new, open, failed, missing, closed) and, for a background one, its thread."""

    def __init__(self, hub: TrackerHub, tracker: Tracker, failures: int) -> None:
        self.hub, self.tracker = hub, tracker
        self.state = "new"
        self.sent: set[int] = set()
        self.failures = failures
        self.jobs: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self.thread: threading.Thread | None = None

    def submit(self, job: Callable[[], None]) -> None:
        """Run `job` now (local trackers) or on the tracker's thread, in order."""
        if not self.tracker.background:
            self.guard(job)
            return
        if self.thread is None:
            self.thread = threading.Thread(target=self._loop, name=f"tracker-{self.tracker.name}", daemon=True)
            self.thread.start()
        self.jobs.put(job)

    def _loop(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            self.guard(job)

    def guard(self, job: Callable[[], None]) -> None:
        """Run `job`; a failure is reported and leaves the tracker to be reopened at the next epoch."""
        try:
            job()
        except MissingPackage as exc:
            self.state = "missing"
            self.hub.report(self, one_line(exc), retry=False)
        except Exception as exc:  # any trouble of a tracker (network, credentials, disk) must not end training
            self.state = "failed"
            self.hub.report(self, one_line(exc), retry=True)

    def join(self, deadline: float) -> bool:
        """Let the thread finish its queue until `deadline` (monotonic); False when it is still busy."""
        if self.thread is None:
            return True
        self.jobs.put(None)
        self.thread.join(max(0.0, deadline - time.monotonic()))
        return not self.thread.is_alive()


class TrackerHub:
    """The trackers of one trainer process."""

    def __init__(self, ctx: TrackerContext, trackers: list[Tracker], emit: Callable[..., Any]) -> None:
        self.ctx = ctx
        self._emit = emit
        self._emit_lock = threading.Lock()
        self.every = max(1, int(ctx.settings.batch_every))
        self.history: list[dict[str, Any]] = []
        self.finished = False
        self.runners = [_Runner(self, t, _failures(ctx.records.get(t.name))) for t in trackers]

    # ------------------------------------------------------------------ hooks the trainer calls

    def start(self, earlier_epochs: list[dict[str, Any]]) -> None:
        """Open every tracker; `earlier_epochs` are the run's finished epochs before this process (to catch up)."""
        self.history = list(earlier_epochs)
        for runner in self.runners:
            snapshot = list(self.history)
            runner.submit(lambda r=runner, h=snapshot: self._open(r, h))

    def batch(self, iteration: int, loss_sum: Any, count: int, lr: float) -> None:
        """Every N-th global iteration: the epoch's running mean losses and the lr to trackers that want them."""
        if (iteration + 1) % self.every:
            return
        for runner in self.runners:
            if runner.tracker.wants_batches and runner.state == "open":
                box, cls, dfl = (float(v) / max(count, 1) for v in loss_sum.tolist())
                scalars = {"batch/box_loss": box, "batch/cls_loss": cls, "batch/dfl_loss": dfl, "batch/lr": float(lr)}
                runner.submit(lambda r=runner, s=scalars: r.tracker.log_batch(iteration, s))

    def epoch(self, event: dict[str, Any]) -> None:
        """A finished epoch whose checkpoint is written: to every tracker (reopening the ones that failed)."""
        self.history.append(dict(event))
        snapshot = list(self.history)
        for runner in self.runners:
            runner.submit(lambda r=runner, e=dict(event), h=snapshot: self._epoch(r, e, h))

    def finish(self, best: Path, last: Path) -> None:
        """Training is done: checkpoints as artefacts, trackers closed (waits up to FINISH_WAIT_S)."""
        self.finished = True
        self._end(FINISHED, [p for p in (Path(best), Path(last)) if p.is_file()], FINISH_WAIT_S)

    def close(self, outcome: str) -> None:
        """The process ends otherwise (STOPPED or FAILED): close the trackers, waiting up to CLOSE_WAIT_S."""
        if not self.finished:
            self.finished = True
            self._end(outcome, [], CLOSE_WAIT_S)

    # ------------------------------------------------------------------ jobs (on the tracker's thread)

    def _open(self, runner: _Runner, history: list[dict[str, Any]]) -> None:
        runner.sent = set(runner.tracker.open(self.ctx))
        had_failed = runner.state == "failed"
        runner.state = "open"
        if had_failed:
            self._record(runner, ok=True)
            LOG.info(f"{runner.tracker.name}: working again")
        self._catch_up(runner, history)

    def _catch_up(self, runner: _Runner, history: list[dict[str, Any]]) -> None:
        by_epoch = {int(e["epoch"]): e for e in history if isinstance(e.get("epoch"), int)}
        for epoch in sorted(by_epoch):
            if epoch not in runner.sent:
                runner.tracker.log_epoch(epoch, by_epoch[epoch])
                runner.sent.add(epoch)

    def _epoch(self, runner: _Runner, event: dict[str, Any], history: list[dict[str, Any]]) -> None:
        if runner.state in ("new", "failed"):
            self._open(runner, history)  # the retry: catches up with this epoch too
        elif runner.state == "open":
            self._catch_up(runner, [event])

    def _finish(self, runner: _Runner, outcome: str, artefacts: list[Path]) -> None:
        if runner.state in ("new", "failed"):
            self._open(runner, list(self.history))  # one last try, so the artefacts still arrive
        if runner.state == "open":
            runner.state = "closed"
            runner.tracker.finish(outcome, artefacts)

    def _end(self, outcome: str, artefacts: list[Path], wait_s: float) -> None:
        for runner in self.runners:
            runner.submit(lambda r=runner: self._finish(r, outcome, artefacts))
        deadline = time.monotonic() + wait_s
        for runner in self.runners:
            if not runner.join(deadline):
                self.report(runner, f"still busy after {wait_s:.0f} s at the end; left behind", retry=False)

    # ------------------------------------------------------------------ reporting

    def report(self, runner: _Runner, message: str, retry: bool) -> None:
        """A tracker's failure: a warning event (kind `tracker`), train.log, and the count in run.yaml."""
        runner.failures += 1
        name = runner.tracker.name
        text = f"{name}: {message}" + ("; retrying at the next epoch" if retry and not self.finished else "")
        LOG.warning(text)
        with self._emit_lock:
            try:
                self._emit("warning", kind=WARNING_KIND, tracker=name, message=text, traceback="")
            except OSError:
                pass
        self._record(runner, failures=runner.failures, last_error=message[:MESSAGE_CHARS], ok=False)

    def _record(self, runner: _Runner, **fields: Any) -> None:
        try:
            self.ctx.record(runner.tracker.name, **fields)
        except (OSError, ValueError) as exc:  # run.yaml not writable: the warning event still says it
            LOG.warning(f"{runner.tracker.name}: cannot record in run.yaml: {exc}")


class NoTrackers:
    """The hub of a process that tracks nothing (other ranks, every tracker off)."""

    finished = True

    def batch(self, iteration: int, loss_sum: Any, count: int, lr: float) -> None:
        """Nothing to do."""

    def epoch(self, event: dict[str, Any]) -> None:
        """Nothing to do."""

    def finish(self, best: Path, last: Path) -> None:
        """Nothing to do."""

    def close(self, outcome: str) -> None:
        """Nothing to do."""


NO_TRACKERS = NoTrackers()


def _failures(record: dict[str, Any] | None) -> int:
    value = (record or {}).get("failures")
    return value if isinstance(value, int) and value >= 0 else 0


def earlier_epochs(events_path: Path, before: int) -> list[dict[str, Any]]:
    """The run's `epoch` events for epochs < `before` (the trainer has already dropped later ones on resume)."""
    if before <= 0:
        return []
    from yolotui.runs.eventlog import epoch_events

    return epoch_events(events_path, before)


def open_trackers(trainer: Any) -> TrackerHub | NoTrackers:
    """The hub for `trainer` (rank 0 only), its trackers opening; NO_TRACKERS when none is on."""
    if not trainer.dist.main:
        return NO_TRACKERS
    from yolotui.runs import layout

    run_dir = Path(trainer.run_dir)
    settings = read_settings(run_dir)
    if settings.tensorboard_skipped():
        LOG.info("TensorBoard (on by default) is not installed here, so this run writes no event files: "
                 "pip install 'yolotui[tensorboard]' for them")
    names = settings.enabled()
    if not names:
        return NO_TRACKERS
    from yolotui.runs.runconfig import run_yaml_field

    run_name = run_yaml_field(run_dir, "name")
    ctx = TrackerContext(run_dir=run_dir, run_name=str(run_name) if isinstance(run_name, str) and run_name else run_dir.name,
                         settings=settings, opt=dict(trainer.opt), hyp=dict(trainer.hyp), epochs=int(trainer.epochs),
                         batches=int(trainer.batches), start_epoch=int(trainer.start_epoch),
                         start_step=int(trainer.start_step), records=read_records(run_dir))
    hub = TrackerHub(ctx, [make_tracker(name) for name in names], trainer.events.emit)
    hub.start(earlier_epochs(run_dir / layout.EVENTS_JSONL, ctx.start_epoch))
    return hub


def close_trackers(trainer: Any) -> None:
    """At the trainer process's end: close its trackers (stopped when asked to stop, else failed)."""
    hub = getattr(trainer, "trackers", None)
    if hub is None or hub.finished:
        return
    stop = getattr(getattr(trainer, "requests", None), "stop", False)
    hub.close(STOPPED if stop else FAILED)
