"""The trainer process: trains one run directory, writing events, results, checkpoints
(docs/architecture.md, "The run folder").

`python -m yolotui.engine train --run-dir RUN` reads RUN/opt.yaml and RUN/hyp.yaml. When RUN/weights/last.pt
exists it resumes from it exactly: model, EMA, optimizer (and accumulated gradients), scaler, RNG, early-stop
state, and the position inside the interrupted epoch; results rows and events past the checkpoint are dropped.
The only options a resume may change come on the command line: --epochs (extend; the LR schedule is re-planned
for the new total, continuing at the current epoch), --batch-size (accumulation re-derived, nominal batch 64
kept), --device, --workers.
"""

from __future__ import annotations

import logging
import math
import os
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from yolotui.config import opt_yaml_dict, save_yaml
from yolotui.engine.data import pipeline
from yolotui.engine.evaluate import validate as validation
from yolotui.engine.loss.yolo_loss import loss_for_model
from yolotui.engine.trackers.hub import NO_TRACKERS, close_trackers, open_trackers
from yolotui.engine.train import ddp
from yolotui.engine.train.checkpointing import TrainerCheckpoints
from yolotui.engine.train.compiled import training_forward
from yolotui.engine.train.ema import ModelEMA, unwrap
from yolotui.engine.train.failures import NanGuard, classify_exception, failure_message
from yolotui.engine.train.faults import FaultInjector
from yolotui.engine.train.freeze import frozen_state_keys, hold_frozen_bn
from yolotui.engine.train.loop_timing import LoopTiming
from yolotui.engine.train.memory_format import training_memory_format
from yolotui.engine.train.optim import NOMINAL_BATCH, accumulation_steps, build_optimizer, scaled_weight_decay
from yolotui.engine.train.precision import autocast_dtype, describe, to_float32
from yolotui.engine.train.schedule import make_plan, warmup_accumulation
from yolotui.engine.train.signals import SignalRequests
from yolotui.engine.train.startup import (
    DATA_LOG,
    LOG,
    TrainerStartup,
    read_attempt,
    seed_everything,
    select_device,
)
from yolotui.errors import UserError
from yolotui.runs import layout
from yolotui.runs.events import EventWriter
from yolotui.runs.results import append_row

BATCH_EVENT_INTERVAL_S = 0.3  # at most ~3 batch events a second
LOG_INTERVAL_S = 10.0  # progress lines in train.log (the events carry every detail)
GRAD_CLIP_NORM = 10.0
BN_CALIBRATION_IMAGES = 64  # training images whose statistics the EMA model's BatchNorm layers get before validation


@dataclass
class EngineOverrides:
    """Options a launch or resume may set on the trainer's command line (None = keep)."""

    epochs: int | None = None
    batch_size: int | None = None
    device: str | None = None
    workers: int | None = None
    lr_scale: float | None = None  # multiplies the scheduled lr (the nan remedy halves it); kept in checkpoints
    accumulate: int | None = None  # batches per optimizer step (the oom remedy doubles it as the batch halves)
    cache: str | None = None  # "ram" or "none" (the host-oom remedy turns the RAM cache off)


class Trainer(TrainerStartup, TrainerCheckpoints):
    """One training process for one run directory."""

    def __init__(self, run_dir: Path, overrides: EngineOverrides | None = None) -> None:
        self.run_dir = Path(run_dir).resolve()
        self.overrides = overrides or EngineOverrides()
        self.weights_dir = layout.weights_dir(self.run_dir)
        self.last_path = self.weights_dir / layout.LAST_PT
        self.best_path = self.weights_dir / layout.BEST_PT
        self.dist = ddp.dist_info()
        self.events: Any = (EventWriter(self.run_dir / layout.EVENTS_JSONL, read_attempt(self.run_dir))
                            if self.dist.main else _NoEvents())
        self.requests = SignalRequests()
        self.faults = FaultInjector.from_env(read_attempt(self.run_dir))  # YOLOTUI_FAULT (tests only)
        self.nan_guard = NanGuard()
        self.save_period_s = 600.0
        self.last_save_time = time.monotonic()
        self.last_log_time = 0.0
        self.last_metrics: dict[str, float] = {}
        self.trackers: Any = NO_TRACKERS  # TensorBoard, MLflow, W&B (engine/trackers); opened in train()

    # ------------------------------------------------------------------------------------------ setup

    def _log(self, message: str, level: int = logging.INFO, logger: logging.Logger = LOG) -> None:
        if self.dist.main:
            logger.log(level, message)



    def setup(self) -> None:
        """Read options, data and model; restore a checkpoint when one exists."""
        for stale in self.weights_dir.glob(".*.tmp"):  # temp files of a write killed before its replace
            stale.unlink(missing_ok=True)
        self._load_options()
        seed_everything(int(self.opt["seed"]) + 1 + self.dist.rank, deterministic=True)
        device = str(self.opt.get("device", ""))
        self.device = ddp.rank_device(self.dist, device) if self.dist.distributed else select_device(device)
        self.cuda = self.device.type == "cuda"
        if self.dist.distributed:
            if self.batch_size % self.dist.world_size:
                raise UserError(f"--batch-size {self.batch_size} must be a multiple of the {self.dist.world_size}"
                                " processes")
            if self.cuda:
                self.device = torch.device(f"cuda:{self.dist.local_rank}")
            ddp.init(self.dist, self.cuda)
        self.rank_batch = self.batch_size // self.dist.world_size
        data = pipeline.load_data(self.opt)
        self.data = data
        self._log(f"data {self.opt.get('data')}: {data.nc} classes, cache {self.opt.get('cache') or 'none'}, "
                  f"workers {self.opt.get('workers')}", logging.DEBUG, DATA_LOG)
        self.nc, self.names = data.nc, data.names
        self._build_model()
        self.imgsz = int(self.opt["imgsz"])
        nominal = int(self.hyp.get("nbs", NOMINAL_BATCH))  # optional hyp key (hyp.short-run.yaml); official: 64
        self.accumulate = self.accumulate_override or accumulation_steps(self.batch_size, nominal)
        decay = scaled_weight_decay(float(self.hyp["weight_decay"]), self.batch_size, nominal)
        if self.accumulate_override:  # weight decay follows the images per optimizer step actually used
            decay = float(self.hyp["weight_decay"]) * self.batch_size * self.accumulate / nominal
        self.optimizer = build_optimizer(self.model, self.opt["optimizer"], float(self.hyp["lr0"]),
                                         float(self.hyp["momentum"]), decay)
        self.ema = ModelEMA(self.model)
        self.ema.frozen = frozen_state_keys(unwrap(self.model), self.freeze_prefixes)
        self.amp_dtype = autocast_dtype(self.device, str(self.opt.get("precision") or "auto"))
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.cuda and self.amp_dtype is torch.float16)
        self.loss_fn = loss_for_model(unwrap(self.model), self.hyp, float(self.opt.get("label_smoothing", 0.0)))
        self.forward = training_forward(self.model, bool(self.opt.get("compile")), self.events.emit, self._log)
        self.train_set, self.val_loader = pipeline.build_datasets(data, self.opt, self.hyp, self.rank_batch)
        self.batches = pipeline.batches_per_epoch(self.train_set, self.rank_batch, self.dist.world_size)
        self.plan = make_plan(self.opt, self.hyp, self.epochs, self.batches)
        self.start_epoch, self.start_step = 0, 0
        self.best_fitness, self.best_epoch = 0.0, -1
        self.last_opt_step = -1
        self.epoch_loss_sum = torch.zeros(3)
        self.pending_grads: dict[str, torch.Tensor] | None = None
        self.resumed_from = None
        if self.resume_ckpt is not None:
            self._restore(self.resume_ckpt, decay)
        self.resume_ckpt = None
        self.opt["accumulate"] = self.accumulate
        self.opt["world_size"] = self.dist.world_size
        if not self.dist.main:
            return
        save_yaml(self.run_dir / layout.OPT_YAML, opt_yaml_dict({**self.opt, "save_dir": str(self.run_dir)}))
        save_yaml(self.run_dir / layout.HYP_YAML, self.hyp)


    # ------------------------------------------------------------------------------------- checkpoints




    # ---------------------------------------------------------------------------------------- training

    def _batch_event(self, epoch: int, i: int, mean_losses: torch.Tensor, imgs_per_s: float) -> None:
        gpu_mem = round(torch.cuda.memory_reserved(self.device) / 1e9, 3) if self.cuda else None
        self.events.emit("batch", epoch=epoch, epochs=self.epochs, batch=i + 1, batches=self.batches,
                         losses=_loss_dict(mean_losses), lr=float(self.optimizer.param_groups[0]["lr"]),
                         imgs_per_s=round(imgs_per_s, 2), gpu_mem_gb=gpu_mem)

    def _train_step(self, batch: dict[str, Any], ni: int) -> torch.Tensor:
        imgs = batch["img"].to(self.device, non_blocking=True)  # uint8, channels_last from the loader
        imgs = imgs.float().div_(255) if imgs.dtype == torch.uint8 else imgs.float() / 255
        imgs = imgs.contiguous(memory_format=training_memory_format(self.device))
        targets = batch["targets"].to(self.device, non_blocking=True)
        self.faults.before_step()
        amp = self.amp_dtype
        with torch.autocast(device_type=self.device.type, dtype=amp, enabled=amp is not None):
            preds = self.forward(imgs)  # the model, through torch.compile with --compile
            if amp is torch.float16:  # as the official trainer: the loss under AMP too
                loss, items = self.loss_fn(preds, targets)
        if amp is not torch.float16:  # bf16 (CPU) or fp32: the loss and the assigner in float32
            loss, items = self.loss_fn(to_float32(preds), targets)
        loss = self.faults.loss(loss)
        if self.dist.distributed:
            loss = loss * self.dist.world_size  # DDP averages gradients over ranks
        finite = bool(torch.isfinite(loss.detach()))
        if self.dist.distributed:  # every rank must skip the same step, or the gradient all-reduce hangs
            finite = not ddp.agree([not finite], self.dist, self.device)[0]
        if not self.nan_guard.check(finite, f"iteration {ni}"):
            return torch.zeros(3)  # skipped: a lone non-finite step (fp16 overflow) must not poison the weights
        self.scaler.scale(loss).backward()
        accumulate = warmup_accumulation(ni, self.plan.warmup_iters, self.accumulate)
        if ni - self.last_opt_step >= accumulate:
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=GRAD_CLIP_NORM)
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.optimizer.zero_grad(set_to_none=True)
            self.ema.update(self.model)
            self.last_opt_step = ni
        return items.detach().float().cpu()

    def _train_epoch(self, epoch: int, start_step: int) -> bool:
        """Train one epoch from batch `start_step`; False when a stop request ended it early."""
        self.model.train()
        hold_frozen_bn(unwrap(self.model), self.freeze_prefixes)  # frozen BatchNorm keeps its statistics
        loader = pipeline.epoch_loader(self.train_set, self.opt, self.rank_batch, epoch, start_step,
                                         mosaic=self._mosaic(epoch), rank=self.dist.rank,
                                         world_size=self.dist.world_size)
        if start_step == 0:
            self.epoch_loss_sum = torch.zeros(3)
            self.optimizer.zero_grad(set_to_none=True)
        elif self.pending_grads:
            for name, param in unwrap(self.model).named_parameters():
                if name in self.pending_grads:
                    param.grad = self.pending_grads[name].to(self.device)
        self.pending_grads = None
        last_event, window_start, window_images = 0.0, time.monotonic(), 0
        self.loop_timing = LoopTiming()  # data wait vs compute, for the epoch event's `loop`
        for i, batch in enumerate(self.loop_timing.wrap(loader), start=start_step):
            ni = i + self.batches * epoch
            self.plan.apply(self.optimizer, epoch, ni, float(self.hyp["lr0"]), self.batches * epoch)
            if self.lr_scale != 1.0:
                for group in self.optimizer.param_groups:
                    group["lr"] *= self.lr_scale
            items = self._train_step(batch, ni)
            self.epoch_loss_sum += items
            self.trackers.batch(ni, self.epoch_loss_sum, i + 1, self.optimizer.param_groups[0]["lr"])
            window_images += int(batch["img"].shape[0])
            now = time.monotonic()
            if now - last_event >= BATCH_EVENT_INTERVAL_S or i + 1 == self.batches:
                rate = window_images / max(now - window_start, 1e-6)
                self._batch_event(epoch, i, self.epoch_loss_sum / (i + 1), rate)
                last_event, window_start, window_images = now, now, 0
            if now - self.last_log_time >= LOG_INTERVAL_S or i + 1 == self.batches or i == start_step:
                self.last_log_time = now
                self._log(f"epoch {epoch + 1}/{self.epochs} batch {i + 1}/{self.batches} "
                          + " ".join(f"{k}={v:.4f}" for k, v in _loss_dict(self.epoch_loss_sum / (i + 1)).items()))
            due = now - self.last_save_time >= self.save_period_s
            stop, save, due = ddp.agree([self.requests.stop, self.requests.save, due], self.dist, self.device)
            self.requests.stop = stop
            if stop or save or due:
                self._save_mid_epoch(epoch, i + 1)
                self.requests.save = False
                if self.requests.stop:
                    return False
        return True

    def _mosaic(self, epoch: int) -> bool:
        close = int(self.opt.get("close_mosaic", 0) or 0)
        return not (close > 0 and epoch >= self.epochs - close)

    def _calibrate_ema_bn(self, epoch: int) -> None:
        """Recompute the EMA model's BatchNorm statistics for its current weights on BN_CALIBRATION_IMAGES training
        images of this epoch (pure function of seed and epoch); see engine/train/ema.py for why."""
        from yolotui.engine.data.loader import build_loader
        from yolotui.engine.train.ema import recalibrate_bn

        batch = max(2, min(self.rank_batch, BN_CALIBRATION_IMAGES))
        loader = build_loader(self.train_set, batch_size=batch, workers=0, shuffle=True,
                              seed=int(self.opt.get("seed", 0)) + 1, epoch=epoch)
        count = math.ceil(min(BN_CALIBRATION_IMAGES, len(self.train_set)) / batch)
        try:
            recalibrate_bn(self.ema.ema, (b["img"] for _, b in zip(range(count), loader)), self.device,
                           keep=self.freeze_prefixes)
        except ValueError as exc:  # e.g. a 1-image data set: BatchNorm needs 2 values per channel
            self._log(f"BatchNorm recalibration skipped: {exc}", logging.WARNING)

    def _end_epoch(self, epoch: int, seconds: float) -> bool:
        """Validate, log, checkpoint; True when early stopping says to stop."""
        lrs = [float(g["lr"]) for g in self.optimizer.param_groups]
        train_losses = self.epoch_loss_sum / max(self.batches, 1)
        if not self.dist.main:  # rank 0 validates and writes; the others follow its early-stop decision
            stop_early, self.requests.stop = ddp.agree([False, self.requests.stop], self.dist, self.device)
            return stop_early
        self._calibrate_ema_bn(epoch)
        val = validation.validation_metrics(self.ema.ema, self.val_loader, self.device, self.nc, self.names,
                                        self.loss_fn)
        fitness = 0.1 * val["mAP50"] + 0.9 * val["mAP50-95"]
        improved = fitness > self.best_fitness or self.best_epoch < 0
        if fitness >= self.best_fitness:
            self.best_epoch = epoch  # official EarlyStopping counts >= as no worse
        if improved:
            self.best_fitness = max(fitness, self.best_fitness)
        patience = int(self.opt.get("patience", 100) or 0)
        stop = patience > 0 and epoch - self.best_epoch >= patience
        append_row(self.run_dir / layout.RESULTS_CSV, epoch,
                   [*train_losses.tolist(), val["P"], val["R"], val["mAP50"], val["mAP50-95"], *val["losses"], *lrs])
        epoch_event = self.events.emit("epoch", epoch=epoch, epochs=self.epochs, losses=_loss_dict(train_losses),
                         metrics={k: val[k] for k in ("P", "R", "mAP50", "mAP50-95")},
                         val_losses=_loss_dict(torch.tensor(val["losses"])), fitness=fitness,
                         best_fitness=self.best_fitness, lr=lrs, seconds=round(seconds, 3),
                         loop=self.loop_timing.fields(workers=int(self.opt.get("workers", 0) or 0),
                                                      cache=self.opt.get("cache") or None))
        self._log(f"epoch {epoch + 1}/{self.epochs} P={val['P']:.4f} R={val['R']:.4f} mAP50={val['mAP50']:.4f} "
                  f"mAP50-95={val['mAP50-95']:.4f} fitness={fitness:.4f} ({seconds:.1f}s)")
        self.last_metrics = {k: val[k] for k in ("P", "R", "mAP50", "mAP50-95")}
        planned = epoch + 1 if stop else self.epochs
        ckpt = self._checkpoint_dict(epoch + 1, 0, planned, {"last_opt_step": int(self.last_opt_step)})
        if stop:
            ckpt["early_stopped"] = True
        self._write(ckpt, self.last_path)
        if improved:
            self._write(ckpt, self.best_path)
        period = int(self.opt.get("save_period", -1) or -1)
        if period > 0 and epoch % period == 0:
            self._write(ckpt, self.weights_dir / f"epoch{epoch}.pt")
        self.trackers.epoch(epoch_event)  # after the checkpoint: trackers get only epochs a resume keeps
        if stop:
            self._log(f"Stopping early: no improvement in {patience} epochs; best epoch {self.best_epoch + 1}")
        stop_early, self.requests.stop = ddp.agree([stop, self.requests.stop], self.dist, self.device)
        return stop_early

    def train(self) -> int:
        """Run (or resume) training to the planned epochs; returns the process exit code."""
        self.save_period_s = float(self.opt.get("save_period_min", 10.0)) * 60.0
        self.last_save_time = time.monotonic()
        self.events.emit("start", config={k: self.opt.get(k) for k in (
            "cfg", "data", "epochs", "batch_size", "imgsz", "optimizer", "weights", "device", "workers")},
            world_size=self.dist.world_size, devices=[_device_name(self.device)], resumed_from=self.resumed_from,
            accumulate=self.accumulate, lr_scale=self.lr_scale, batches=self.batches, frozen=self.frozen,
            transfer=self.transfer_note, precision=describe(self.amp_dtype))
        self._log(f"precision: {describe(self.amp_dtype)} on {_device_name(self.device)}", logging.DEBUG)
        self.trackers = open_trackers(self)
        if self.start_epoch >= self.epochs:
            self._log(f"Nothing to train: {self.start_epoch}/{self.epochs} epochs done; use --epochs N to extend")
            self.events.emit("done", metrics=self.last_metrics, best=str(self.best_path), epochs=self.epochs,
                             best_fitness=self.best_fitness)
            self.trackers.finish(self.best_path, self.last_path)
            return 0
        for epoch in range(self.start_epoch, self.epochs):
            started = time.monotonic()
            start_step = self.start_step if epoch == self.start_epoch else 0
            if not self._train_epoch(epoch, start_step):
                self.events.emit("stop", reason=self.requests.stop_signal or "signal", epoch=epoch,
                                 step=int(self._last_written_step()), checkpoint=str(self.last_path))
                self._log(f"Stopped on {self.requests.stop_signal}; checkpoint saved to {self.last_path}")
                return 0
            if self._end_epoch(epoch, time.monotonic() - started):
                break
            if self.requests.stop and epoch + 1 < self.epochs:  # asked during validation: checkpoint written
                self.events.emit("stop", reason=self.requests.stop_signal, epoch=epoch + 1, step=0,
                                 checkpoint=str(self.last_path))
                return 0
        self.events.emit("done", metrics=self.last_metrics, best=str(self.best_path), epochs=self.epochs,
                         best_fitness=self.best_fitness)
        self.trackers.finish(self.best_path, self.last_path)
        self._log(f"Done. Best fitness {self.best_fitness:.4f}; weights in {self.weights_dir}")
        return 0



class _NoEvents:
    """Event sink of the ranks that do not write (only rank 0 writes events)."""

    def emit(self, type_: str, **fields: Any) -> dict[str, Any]:
        return {"type": type_, **fields}


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return "cpu"


def _loss_dict(values: torch.Tensor) -> dict[str, float]:
    box, cls, dfl = (float(v) for v in values.tolist())
    return {"box": round(box, 5), "cls": round(cls, 5), "dfl": round(dfl, 5)}


def run_trainer(run_dir: Path, overrides: EngineOverrides | None = None) -> int:
    """Entry point of the trainer process: set up, train, and report failures as events."""
    apply_logging(Path(run_dir))
    from yolotui.engine.train.memory_format import keep_freed_memory

    LOG.debug(keep_freed_memory())  # the trainer process reuses freed host memory (no page faults every step)
    trainer = Trainer(run_dir, overrides)
    trainer.requests.install()
    threads = os.environ.get("YOLOTUI_TORCH_THREADS")
    if threads:
        torch.set_num_threads(int(threads))
    try:
        return _run(trainer)
    finally:
        close_trackers(trainer)
        ddp.finish(trainer.dist)


def apply_logging(run_dir: Path) -> None:
    """Configure logging from run.yaml's `logging` entry (re-applied on every attempt); defaults without one."""
    from yolotui.logconfig import apply
    from yolotui.runs.runconfig import read_run_config, run_yaml_path

    entry = None
    if run_yaml_path(run_dir).exists():
        try:
            entry = read_run_config(run_dir).get("logging")
        except UserError:
            entry = None
    try:
        apply(entry, "trainer")
    except (ValueError, TypeError, AttributeError, ImportError, OSError, UserError) as exc:
        apply(None, "trainer")  # a configuration that no longer applies must not stop training
        LOG.warning(f"logging configuration from run.yaml not applied: {exc}")


def _run(trainer: Trainer) -> int:
    """Setup and train, turning failures into `error` events."""
    try:
        trainer.setup()
        return trainer.train()
    except Exception as exc:  # report the failure class (yolotui/engine/train/failures.py) for the supervisor's remedy
        kind = classify_exception(exc)
        trainer.events.emit("error", kind=kind, message=failure_message(exc, kind),
                            traceback="" if isinstance(exc, UserError) else _tail())
        if isinstance(exc, UserError):
            LOG.error(f"yolotui: error: {exc}")
            return 2
        raise


def _tail(lines: int = 15) -> str:
    return "\n".join(traceback.format_exc().splitlines()[-lines:])


__all__ = ["EngineOverrides", "Trainer", "run_trainer"]
