"""The tracker interface: what the trainer tells an experiment tracker, and the names it uses.

A Tracker is opened once per trainer process (and again after a failure, at the next epoch), learns what its
tracker already holds (the epochs it has, so a resume continues instead of writing twice), then is sent the
per-N-batches losses (if it wants them), every finished epoch (only once its checkpoint is on disk), and at
the end the outcome and the best and last checkpoints. Each implementation imports its library lazily, inside
`open`, and raises MissingPackage when it is not installed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yolotui.runs import trackers as records
from yolotui.runs.trackers import TrackerSettings

FINISHED, STOPPED, FAILED = "finished", "stopped", "failed"  # how a trainer process ended, for `finish`

# The official YOLOv9 trainer's TensorBoard tags (train_dual.py), one point per epoch at step = epoch.
EPOCH_TAGS = ("train/box_loss", "train/cls_loss", "train/dfl_loss", "metrics/precision", "metrics/recall",
              "metrics/mAP_0.5", "metrics/mAP_0.5:0.95", "val/box_loss", "val/cls_loss", "val/dfl_loss",
              "x/lr0", "x/lr1", "x/lr2", "metrics/fitness")
BATCH_PREFIX = "batch/"  # per-N-batches tags, at step = global training iteration (0-based)
BATCH_TAGS = ("batch/box_loss", "batch/cls_loss", "batch/dfl_loss", "batch/lr")
# Names for MLflow and W&B (no ':' in a metric key; the metric names ultralytics' trackers use).
REMOTE_NAMES = {"metrics/mAP_0.5": "metrics/mAP50", "metrics/mAP_0.5:0.95": "metrics/mAP50-95",
                "x/lr0": "lr/pg0", "x/lr1": "lr/pg1", "x/lr2": "lr/pg2", "metrics/fitness": "fitness"}
PARAM_VALUE_CHARS = 500  # longer option values (a list of paths) are cut for the trackers' params


class MissingPackage(Exception):
    """The tracker's package is not installed; the message is the one-line install hint."""


@dataclass
class TrackerContext:
    """What every tracker needs to know about the run and the trainer process."""

    run_dir: Path
    run_name: str
    settings: TrackerSettings
    opt: dict[str, Any]
    hyp: dict[str, Any]
    epochs: int
    batches: int
    start_epoch: int = 0
    start_step: int = 0
    records: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def resumed(self) -> bool:
        """True when this process continues from a checkpoint."""
        return self.start_epoch > 0 or self.start_step > 0

    @property
    def resume_iteration(self) -> int:
        """The first training iteration this process runs (global, 0-based)."""
        return self.start_epoch * max(self.batches, 1) + self.start_step

    def record(self, tracker: str, **fields: Any) -> None:
        """Remember `fields` for `tracker` here and in run.yaml's tracker_runs (what the next attempt reads)."""
        self.records.setdefault(tracker, {}).update(fields)
        records.update_record(self.run_dir, tracker, **fields)

    def params(self) -> dict[str, Any]:
        """Options and hyperparameters, flat, as plain scalars (lists and None as text)."""
        out: dict[str, Any] = {}
        for key, value in self.opt.items():
            out[str(key)] = _scalar(value)
        for key, value in self.hyp.items():
            out[f"hyp.{key}" if key in out else str(key)] = _scalar(value)
        return out


def _scalar(value: Any) -> Any:
    if isinstance(value, bool) or isinstance(value, (int, float)):
        return value
    text = "None" if value is None else str(value)
    return text[:PARAM_VALUE_CHARS]


def epoch_scalars(event: dict[str, Any]) -> dict[str, float]:
    """The per-epoch values of an `epoch` event under the official TensorBoard tags (missing ones left out)."""
    losses = event.get("losses") or {}
    metrics = event.get("metrics") or {}
    val_losses = event.get("val_losses") or {}
    lrs = event.get("lr") or []
    pairs = [("train/box_loss", losses.get("box")), ("train/cls_loss", losses.get("cls")),
             ("train/dfl_loss", losses.get("dfl")), ("metrics/precision", metrics.get("P")),
             ("metrics/recall", metrics.get("R")), ("metrics/mAP_0.5", metrics.get("mAP50")),
             ("metrics/mAP_0.5:0.95", metrics.get("mAP50-95")), ("val/box_loss", val_losses.get("box")),
             ("val/cls_loss", val_losses.get("cls")), ("val/dfl_loss", val_losses.get("dfl")),
             *((f"x/lr{i}", lr) for i, lr in enumerate(lrs[:3] if isinstance(lrs, list) else [])),
             ("metrics/fitness", event.get("fitness"))]
    return {tag: float(value) for tag, value in pairs if isinstance(value, (int, float)) and not isinstance(value, bool)}


def remote_scalars(event: dict[str, Any]) -> dict[str, float]:
    """epoch_scalars under the names MLflow and W&B get."""
    return {REMOTE_NAMES.get(tag, tag): value for tag, value in epoch_scalars(event).items()}


class Tracker:
    """One experiment tracker. `background` ones (network) run on their own thread, so training never waits."""

    name = "tracker"
    background = False
    wants_batches = False

    def open(self, ctx: TrackerContext) -> set[int]:
        """Connect (creating or re-using the tracker run); returns the epochs the tracker already holds."""
        raise NotImplementedError

    def log_batch(self, step: int, scalars: dict[str, float]) -> None:
        """Per-N-batches values at global iteration `step` (only trackers with wants_batches)."""

    def log_epoch(self, epoch: int, event: dict[str, Any]) -> None:
        """One finished epoch (its `epoch` event), whose checkpoint is already written."""
        raise NotImplementedError

    def finish(self, outcome: str, artefacts: list[Path]) -> None:
        """End of this trainer process: FINISHED (with the checkpoints as artefacts), STOPPED or FAILED."""
