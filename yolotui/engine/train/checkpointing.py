"""The trainer's checkpoints: what a checkpoint holds (a plain dict: docs/architecture.md, "weights/"),
writing last.pt and best.pt (never a diverged state), the mid-epoch save with accumulated gradients, and the
exact restore that drops results rows and events past the checkpoint. A mixin of yolotui.engine.train.trainer.Trainer.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import torch

from yolotui.engine.train import checkpoint as ckpt_io
from yolotui.engine.train.ema import unwrap
from yolotui.engine.train.schedule import LrPlan
from yolotui.runs import layout
from yolotui.runs.events import rewind_run
from yolotui.runs.results import truncate_after


def _finite_weights(ckpt: dict[str, Any]) -> bool:
    """True when every floating tensor of the checkpoint's model and EMA is finite."""
    for part in ("model", "ema"):
        for tensor in (ckpt.get(part) or {}).values():
            if isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and not torch.isfinite(tensor).all():
                return False
    return True


def _cpu(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone().cpu()
    if isinstance(obj, dict):
        return {k: _cpu(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_cpu(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_cpu(v) for v in obj)
    return obj


def _plain_yaml(obj: Any) -> Any:
    """A model yaml dict with tuples as lists and only plain scalars (weights_only-safe)."""
    if isinstance(obj, dict):
        return {str(k): _plain_yaml(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain_yaml(v) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return str(obj)


def _plain_opt(opt: dict[str, Any]) -> dict[str, Any]:
    return _plain_yaml(opt)


def drop_events_after(path: Path, epoch: int, step: int) -> int:
    """Drop batch/epoch/checkpoint/done events past position (epoch, step) from the run's streams; count dropped.

    Reads and rewrites only the streams' tails past the checkpoint (yolotui.runs.events.rewind_run)."""
    position = (epoch, step)

    def later(event: dict[str, Any]) -> bool:
        kind = event.get("type")
        if kind == "batch":
            return (int(event.get("epoch", 0)), int(event.get("batch", 0))) > position
        if kind == "epoch":
            return int(event.get("epoch", 0)) >= epoch
        if kind == "checkpoint":
            return (int(event.get("epoch", 0)), int(event.get("step", 0))) > position
        return kind == "done"

    return rewind_run(path, later)


class TrainerCheckpoints:
    """Checkpoint writing and restoring for the trainer (see the module docstring)."""

    def _restore(self, ckpt: dict[str, Any], decay: float) -> None:
        """Put every piece of training state back as the checkpoint recorded it."""
        self.ema.ema.load_state_dict(ckpt["ema"])
        self.ema.updates = int(ckpt["updates"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        self.optimizer.param_groups[1]["weight_decay"] = decay  # batch may have changed: re-derive
        if ckpt.get("scaler"):
            self.scaler.load_state_dict(ckpt["scaler"])
        sched = ckpt["scheduler"]
        plan = LrPlan.from_dict(sched["plan"])
        old_batch = int(ckpt["opt"]["batch_size"])
        self.plan = plan if self.epochs == plan.epochs else plan.extended(self.epochs)
        self.best_fitness = float(ckpt["best_fitness"])
        self.best_epoch = int(ckpt.get("best_epoch", -1))
        self.start_epoch, self.start_step = int(ckpt["epoch"]), int(ckpt["step"])
        train_state = ckpt.get("train_state") or {}
        self.last_opt_step = int(train_state.get("last_opt_step", -1))
        if self.start_step and old_batch != self.batch_size:
            # Position is counted in batches of the old size; continue at the same sample (rounded down).
            self.start_step = (self.start_step * old_batch) // self.batch_size
            self.last_opt_step = self.start_epoch * self.batches + self.start_step - 1
        if "epoch_loss_sum" in train_state:
            self.epoch_loss_sum = train_state["epoch_loss_sum"].clone()
        self.pending_grads = train_state.get("grads")
        ckpt_io.set_rng_state(ckpt.get("rng") or {})
        self.resumed_from = {"path": str(self.last_path), "epoch": self.start_epoch, "step": self.start_step}
        if not self.dist.main:
            return
        kept = truncate_after(self.run_dir / layout.RESULTS_CSV, self.start_epoch - 1)
        dropped = drop_events_after(self.run_dir / layout.EVENTS_JSONL, self.start_epoch, self.start_step)
        self._log(f"Resuming from {self.last_path}: epoch {self.start_epoch}, batch {self.start_step}"
                  f" of {self.epochs} epochs; kept {kept} results rows, dropped {dropped} later events")

    def _checkpoint_dict(self, epoch: int, step: int, epochs: int, train_state: dict[str, Any] | None) -> dict:
        model = unwrap(self.model)
        return {
            "format": ckpt_io.FORMAT,
            "model_yaml": _plain_yaml(model.yaml),
            "nc": int(self.nc),
            "names": list(self.names),
            "epoch": int(epoch),
            "step": int(step),
            "epochs": int(epochs),
            "model": {k: v.detach().clone().cpu() for k, v in model.state_dict().items()},
            "ema": {k: v.detach().clone().cpu() for k, v in self.ema.ema.state_dict().items()},
            "updates": int(self.ema.updates),
            "optimizer": _cpu(self.optimizer.state_dict()),
            "scheduler": {"plan": self.plan.to_dict(), "last_epoch": int(epoch) - 1},
            "scaler": self.scaler.state_dict() if self.scaler.is_enabled() else {},
            "rng": ckpt_io.rng_state(),
            "best_fitness": float(self.best_fitness),
            "best_epoch": int(self.best_epoch),
            "train_state": train_state or {},
            "opt": _plain_opt(self.opt),
            "hyp": dict(self.hyp),
            "versions": ckpt_io.versions(),
            "date": ckpt_io.now_iso(),
        }

    def _write(self, ckpt: dict[str, Any], path: Path) -> None:
        self.last_save_time = time.monotonic()
        if not self.dist.main:
            return
        if self.nan_guard.suspect or not _finite_weights(ckpt):
            # never replace a good checkpoint with a diverged state: the nan remedy resumes from the last good one
            self.events.emit("warning", kind="nan", message=f"not writing {path.name}: the loss or weights are "
                             "not finite; keeping the last good checkpoint", traceback="")
            return
        manifest = ckpt_io.save_checkpoint(ckpt, path)
        self._log(f"checkpoint {path.name}: epoch {manifest['epoch']} batch {manifest['step']}, "
                  f"{manifest['bytes']} bytes in {manifest['seconds']:.2f} s", logging.DEBUG)
        self.events.emit("checkpoint", path=str(path), epoch=manifest["epoch"], step=manifest["step"],
                         bytes=manifest["bytes"], sha256=manifest["sha256"], seconds=manifest["seconds"])
        self.last_save_time = time.monotonic()

    def _save_mid_epoch(self, epoch: int, step: int) -> None:
        if not self.dist.main:
            self.last_save_time = time.monotonic()
            return
        grads = {name: p.grad.detach().clone().cpu() for name, p in unwrap(self.model).named_parameters()
                 if p.grad is not None}
        state = {"last_opt_step": int(self.last_opt_step), "epoch_loss_sum": self.epoch_loss_sum.clone(),
                 "grads": grads}
        self._write(self._checkpoint_dict(epoch, step, self.epochs, state), self.last_path)

    def _last_written_step(self) -> int:
        manifest = ckpt_io.read_json(layout.manifest_path(self.last_path)) or {}
        return int(manifest.get("step", 0))
