"""Fixture runs for the TUI tests, written directly per the run-directory contract (no supervisor, no torch).

Times are fixed (FIXED_NOW) so that snapshots are deterministic: ages and elapsed times are computed from
the app's injected clock, and every file's mtime is set explicitly.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from yolotui.runs import index, lock
from yolotui.runs.atomic import atomic_write_json
from yolotui.runs.events import EventWriter
from yolotui.runs.layout import EVENTS_JSONL, RESULTS_CSV, TRAIN_LOG, WEIGHTS_DIR
from yolotui.runs.results import append_row
from yolotui.runs.status import RunStatus, status_path

FIXED_NOW = 1_780_000_000.0  # 2026-05-28, a fixed "now" for deterministic screens


def fake_checkpoint_bytes(epoch: int, epochs: int, step: int = 0) -> bytes:
    """A small zip laid out like torch.save's output, holding a plain dict (no tensors)."""
    payload = {"format": "yolotui-1", "epoch": epoch, "step": step, "epochs": epochs, "best_fitness": 0.3,
               "model": {}, "ema": {}, "updates": epoch * 10, "optimizer": {"state": {}}, "scheduler": {},
               "scaler": {}, "rng": {}, "opt": {"epochs": epochs}, "hyp": {}, "versions": {}, "date": "2026-05-28",
               "nc": 3, "names": ["a", "b", "c"], "model_yaml": {}}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("last/data.pkl", pickle.dumps(payload, protocol=2))
        archive.writestr("last/byteorder", "little")
        archive.writestr("last/version", "3\n")
    return buffer.getvalue()


def write_checkpoint(run_dir: Path, name: str, epoch: int, epochs: int, mtime: float, corrupt: bool = False) -> Path:
    """weights/<name> with its manifest; `corrupt` writes garbage bytes that no reader can open."""
    path = Path(run_dir) / WEIGHTS_DIR / name
    path.parent.mkdir(parents=True, exist_ok=True)
    data = os.urandom(3000) if corrupt else fake_checkpoint_bytes(epoch, epochs)
    if corrupt:
        data = b"PK\x03\x04" + data  # starts like a zip, then garbage
    path.write_bytes(data)
    manifest = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "epoch": epoch, "step": 0,
                "epochs": epochs, "keys": ["epoch", "model"]}
    manifest_path = path.with_name(name + ".json")
    if not corrupt:
        manifest_path.write_text(json.dumps(manifest))
        os.utime(manifest_path, (mtime, mtime))
    os.utime(path, (mtime, mtime))
    return path


def metrics_for(epoch: int) -> dict[str, float]:
    """Plausible, deterministic losses and metrics for epoch `epoch` (0-based)."""
    return {"box": 3.0 / (1 + 0.4 * epoch), "cls": 4.0 / (1 + 0.6 * epoch), "dfl": 2.0 / (1 + 0.2 * epoch),
            "P": min(0.95, 0.2 + 0.07 * epoch), "R": min(0.9, 0.15 + 0.06 * epoch),
            "mAP50": min(0.9, 0.1 + 0.07 * epoch), "mAP50-95": min(0.7, 0.05 + 0.045 * epoch)}


def write_epoch(run_dir: Path, writer: EventWriter, epoch: int, epochs: int, batches: int = 20) -> None:
    """A `batch` event at the end of `epoch` (`batch` counts the batches done, as the trainer sends it), its
    `epoch` event and its results.csv row."""
    m = metrics_for(epoch)
    losses = {"box": m["box"], "cls": m["cls"], "dfl": m["dfl"]}
    writer.emit("batch", epoch=epoch, epochs=epochs, batch=batches, batches=batches, losses=losses,
                lr=0.01, imgs_per_s=123.0, gpu_mem_gb=1.5)
    writer.emit("epoch", epoch=epoch, epochs=epochs, losses=losses,
                metrics={k: m[k] for k in ("P", "R", "mAP50", "mAP50-95")}, fitness=m["mAP50-95"], seconds=60.0)
    append_row(Path(run_dir) / RESULTS_CSV, epoch,
               [m["box"], m["cls"], m["dfl"], m["P"], m["R"], m["mAP50"], m["mAP50-95"],
                m["box"], m["cls"], m["dfl"], 0.01, 0.01, 0.01])


@dataclass
class FixtureRun:
    """A run folder written for a test; `lock_fd` is held while the run plays 'running'."""

    path: Path
    name: str
    lock_fd: int | None = None
    threads: list[threading.Thread] = field(default_factory=list)

    def release(self) -> None:
        """Let go of the lock (the supervisor 'dies')."""
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None


def make_run(root: Path, name: str, *, state: str, epochs: int = 10, done_epochs: int = 4,
             attempt: int = 1, hold_lock: bool = False, checkpoint: str | None = "good",
             device: str = "cuda:0", started: float = FIXED_NOW - 3600, failure_class: str | None = None,
             message: str | None = None, attempts: list[dict] | None = None, batch_in_progress: int | None = None,
             log_lines: int = 30) -> FixtureRun:
    """Write a run folder in `state` with `done_epochs` finished epochs and index it."""
    run_dir = Path(root) / name
    run_dir.mkdir(parents=True)
    run = FixtureRun(run_dir, name)
    if hold_lock:
        run.lock_fd = lock.acquire(run_dir)
    writer = EventWriter(run_dir / EVENTS_JSONL, attempt=attempt)
    writer.emit("start", world_size=1, devices=[device], resumed_from=None)
    for epoch in range(done_epochs):
        write_epoch(run_dir, writer, epoch, epochs)
    if batch_in_progress is not None:
        writer.emit("batch", epoch=done_epochs, epochs=epochs, batch=batch_in_progress, batches=20,
                    losses={"box": 1.0, "cls": 1.0, "dfl": 1.0}, lr=0.01, imgs_per_s=150.0, gpu_mem_gb=1.5)
    if state == "finished":
        writer.emit("done", metrics=metrics_for(done_epochs - 1), best=str(run_dir / "weights/best.pt"))
    if failure_class:
        writer.emit("error", kind=failure_class, message=message or "boom", traceback="")
    with open(run_dir / TRAIN_LOG, "w") as log:
        log.write(f"===== attempt {attempt} =====\n")
        for i in range(log_lines):
            log.write(f"{name} log line {i}\n")
    ended = None if state in ("running", "restarting") else started + 3000
    status = RunStatus(name=name, run_dir=str(run_dir), state=state, attempt=attempt, max_attempts=3,
                       supervisor_pid=None, trainer_pid=(4242 if state == "running" and hold_lock else None), started=started, updated=started + 3000,
                       ended=ended, exit_code=(0 if state == "finished" else 1 if state == "failed" else None),
                       failure_class=failure_class, message=message, command=["python", "train.py"],
                       backend="exec", device=device, attempts=attempts or [
                           {"attempt": attempt, "started": started, "ended": ended,
                            "exit_code": 0 if state == "finished" else None, "failure_class": failure_class}])
    atomic_write_json(status_path(run_dir), status.to_dict())
    if checkpoint is not None:
        write_checkpoint(run_dir, "last.pt", done_epochs, epochs, FIXED_NOW - 120, corrupt=checkpoint == "corrupt")
        if done_epochs:
            write_checkpoint(run_dir, "best.pt", done_epochs, epochs, FIXED_NOW - 300)
    index.add(run_dir, name)
    return run


def standard_runs(root: Path) -> dict[str, FixtureRun]:
    """The five fixture runs: finished, running (lock held), failed, interrupted, corrupt last.pt."""
    return {
        "finished": make_run(root, "coco-finished", state="finished", epochs=10, done_epochs=10,
                             started=FIXED_NOW - 7200),
        "running": make_run(root, "shapes-running", state="running", epochs=20, done_epochs=3, hold_lock=True,
                            batch_in_progress=10, started=FIXED_NOW - 600, attempts=[
                                {"attempt": 1, "exit_code": 1, "failure_class": "oom", "remedy": "batch 16 -> 8"},
                                {"attempt": 2}], attempt=2),
        "failed": make_run(root, "bad-data-failed", state="failed", epochs=30, done_epochs=1,
                           failure_class="data", message="data.yaml: key 'train' missing",
                           started=FIXED_NOW - 5400, checkpoint=None),
        "interrupted": make_run(root, "ssh-interrupted", state="running", epochs=50, done_epochs=6,
                                started=FIXED_NOW - 9000),
        "corrupt": make_run(root, "torn-corrupt", state="stopped", epochs=10, done_epochs=2, checkpoint="corrupt",
                            started=FIXED_NOW - 4000),
    }


class Appender(threading.Thread):
    """Plays a trainer: appends batch events, then epoch events and results rows, every `interval` seconds."""

    def __init__(self, run_dir: Path, first_epoch: int, epochs: int, interval: float = 0.1, attempt: int = 1) -> None:
        super().__init__(daemon=True)
        self.run_dir = Path(run_dir)
        self.epoch = first_epoch
        self.epochs = epochs
        self.interval = interval
        self.writer = EventWriter(self.run_dir / EVENTS_JSONL, attempt=attempt)
        self.stop_event = threading.Event()
        self.written_epochs: list[int] = []

    def run(self) -> None:
        while not self.stop_event.is_set() and self.epoch < self.epochs:
            for batch in range(5, 20, 5):  # batches done, as the trainer counts them; write_epoch sends 20/20
                self.writer.emit("batch", epoch=self.epoch, epochs=self.epochs, batch=batch, batches=20,
                                 losses={"box": 1.0, "cls": 1.0, "dfl": 1.0}, lr=0.01, imgs_per_s=200.0,
                                 gpu_mem_gb=1.0)
            write_epoch(self.run_dir, self.writer, self.epoch, self.epochs)
            with open(self.run_dir / TRAIN_LOG, "a") as log:
                log.write(f"epoch {self.epoch} done\n")
            self.written_epochs.append(self.epoch)
            self.epoch += 1
            time.sleep(self.interval)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=5)
