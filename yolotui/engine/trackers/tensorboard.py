"""TensorBoard for engine runs (on by default): event files in the run folder, as the official trainer writes them.

Per epoch, at step = epoch (0-based), the official train_dual.py tags: train/{box,cls,dfl}_loss,
metrics/{precision,recall,mAP_0.5,mAP_0.5:0.95}, val/{box,cls,dfl}_loss, x/lr0..2, plus metrics/fitness; every
N training batches (run.yaml trackers.batch_every, default 20), at step = global iteration, batch/{box,cls,dfl}_loss
(the epoch's running mean) and batch/lr; the options and hyperparameters once, as hparams.

On open the folder's event files are cut back to the checkpoint this process resumes from (tb_files.prune), the
new writer starts with TensorBoard's own purge marker at the resume iteration (for a TensorBoard that is already
watching the folder), and epochs the files lack but the run finished (a kill between checkpoint and flush) are
written from events.jsonl by the hub. Every write is flushed at once: what the checkpoint covers is on disk.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from yolotui.engine.trackers import tb_files
from yolotui.engine.trackers.base import EPOCH_TAGS, MissingPackage, Tracker, TrackerContext, epoch_scalars
from yolotui.runs.trackers import install_hint

LOG = logging.getLogger("yolotui.trainer")
HPARAM_METRICS = ("metrics/precision", "metrics/recall", "metrics/mAP_0.5", "metrics/mAP_0.5:0.95")


class TensorBoardTracker(Tracker):
    """SummaryWriter over the run folder."""

    name = "tensorboard"
    wants_batches = True

    def __init__(self) -> None:
        self.writer: Any = None
        self.present: dict[str, set[int]] = {}
        self.reopened = False  # a second open in one process keeps what this process wrote

    def open(self, ctx: TrackerContext) -> set[int]:
        """Prune what the checkpoint does not cover, open the writer, write hparams once."""
        try:
            from torch.utils.tensorboard import SummaryWriter
            from torch.utils.tensorboard.summary import hparams
        except ImportError as exc:
            raise MissingPackage(install_hint("tensorboard") + " (or give --no-tensorboard)") from exc
        self.close_writer()
        folder = Path(ctx.run_dir)
        first = not self.reopened
        self.reopened = True
        if first and not ctx.resumed and not ctx.records.get(self.name):
            moved = tb_files.set_aside(folder)  # an earlier run's files in a reused folder: kept, not pruned
            if moved is not None:
                LOG.info(f"TensorBoard: the earlier run's event files moved to {moved}")
        everything = 2**62
        pruned = tb_files.prune(folder, ctx.start_epoch if first else everything,
                                ctx.resume_iteration if first else everything)
        if pruned.skipped:
            LOG.warning(f"TensorBoard: {pruned.skipped}")
        elif pruned.dropped:
            LOG.info(f"TensorBoard: dropped {pruned.dropped} event records past the checkpoint "
                     f"(epoch {ctx.start_epoch}, iteration {ctx.resume_iteration})")
        self.present = pruned.present
        purge = ctx.resume_iteration if ctx.resumed and first else None
        self.writer = SummaryWriter(log_dir=str(folder), purge_step=purge, flush_secs=30)
        if not pruned.has_hparams:
            experiment, start, end = hparams(ctx.params(), {tag: 0.0 for tag in HPARAM_METRICS})
            for summary in (experiment, start, end):
                self.writer.file_writer.add_summary(summary)
            self.writer.flush()
        if ctx.records.get(self.name, {}).get("dir") != str(folder):
            ctx.record(self.name, dir=str(folder))
        complete = [self.present.get(tag, set()) for tag in EPOCH_TAGS if tag in self.present]
        return set.intersection(*complete) if complete else set()

    def log_batch(self, step: int, scalars: dict[str, float]) -> None:
        """The per-N-batches values at global iteration `step`."""
        for tag, value in scalars.items():
            self.writer.add_scalar(tag, value, step)
        self.writer.flush()

    def log_epoch(self, epoch: int, event: dict[str, Any]) -> None:
        """One point per epoch tag at step = epoch (tags the files already hold at that step are left)."""
        for tag, value in epoch_scalars(event).items():
            if epoch not in self.present.get(tag, ()):
                self.writer.add_scalar(tag, value, epoch)
                self.present.setdefault(tag, set()).add(epoch)
        self.writer.flush()

    def finish(self, outcome: str, artefacts: list[Path]) -> None:
        """Flush and close the event file."""
        self.close_writer()

    def close_writer(self) -> None:
        """Close the writer if one is open (a reopen after a failure starts a new event file)."""
        writer, self.writer = self.writer, None
        if writer is not None:
            try:
                writer.close()
            except Exception:  # a full disk at close: what was flushed is kept
                pass
