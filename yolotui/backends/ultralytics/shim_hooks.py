"""The ultralytics shim's hooks: the Reporter on ultralytics' trainer callbacks (events, checkpoint writes made
atomic, the unstripped last.pt kept, save-now and stop at a batch boundary, injected faults) and the patch that
forces ultralytics' save_dir into the run folder.

Part of the shim (shim.py, run by path in the user's ultralytics interpreter): standard library only in yolotui's
part, never imports yolotui; loaded by path by shim.py after its siblings.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import time

BATCH_EVENT_INTERVAL_S = 0.5
UNSTRIPPED = "last.unstripped.pt"


# The kit shim.py loaded by path (it runs without yolotui); in yolotui's own process (its tests), the package's.
kit = sys.modules.get("yolotui_shimkit") or importlib.import_module("yolotui.backends.shimkit")
_files, _safety = kit.load_beside(__file__, "shim_files"), kit.load_beside(__file__, "shim_safety")
SHIM_PREFIX, say, Events, Discard = kit.SHIM_PREFIX, kit.say, kit.Events, _files.Discard
atomic_write, atomic_path_class, fsync_dir = kit.atomic_write, _files.atomic_path_class, kit.fsync_dir
drop_results_after, drop_events_from, sha256_of = _files.drop_results_after, _files.drop_events_from, kit.sha256_of
to_float, classify = kit.to_float, kit.classify
parse_faults, raise_fault = _safety.parse_faults, _safety.raise_fault


class StopTraining(BaseException):
    """Raised from a hook to end training at a batch boundary (a stop signal)."""


class Reporter:
    """The shim's actions on ultralytics' trainer callbacks; see the module docstring."""

    def __init__(self, run_dir, attempt, overrides):
        self.run_dir = run_dir
        self.attempt = attempt
        self.events = Events(os.path.join(run_dir, "events.jsonl"), attempt)
        self.overrides = overrides  # batch / workers changed for this attempt (resume, OOM remedy)
        self.faults = [f for f in parse_faults(os.environ.get("YOLOTUI_FAULT")) if f[3] or attempt == 1]
        delay = os.environ.get("YOLOTUI_STEP_DELAY_S") if attempt == 1 else None
        self.delay = to_float(delay) or 0.0
        self.epochs = None
        self.batch_i = 0
        self.steps = 0
        self.epoch_started = None
        self.last_emit = 0.0
        self.images_since = 0
        self.fit_ended = None
        self.final_eval = False
        self.completed = None
        self.save_wanted = False
        self.stop_wanted = None
        self.saved_unstripped = False
        self.save_seconds = None
        self.epoch_emitted = None

    def install_signals(self):
        def on_save(signum, frame):
            self.save_wanted = True

        def on_stop(signum, frame):
            self.stop_wanted = signum

        signal.signal(signal.SIGUSR1, on_save)
        signal.signal(signal.SIGTERM, on_stop)
        signal.signal(signal.SIGINT, on_stop)

    def check_stop(self, trainer):
        if self.stop_wanted is not None:
            name = signal.Signals(self.stop_wanted).name
            say("%s received: stopping at this batch boundary (last.pt stays the one of epoch %d)"
                % (name, int(trainer.epoch)))
            self.events.emit("stop", reason=name, epoch=int(trainer.epoch), step=self.batch_i)
            raise StopTraining(name)

    def hooks(self):
        return {"on_pretrain_routine_start": self.on_pretrain_routine_start, "on_train_start": self.on_train_start,
                "on_train_epoch_start": self.on_train_epoch_start, "on_train_batch_end": self.on_train_batch_end,
                "on_fit_epoch_end": self.on_fit_epoch_end, "on_model_save": self.on_model_save,
                "on_train_end": self.on_train_end}

    def on_pretrain_routine_start(self, trainer):
        """Atomic checkpoint paths; this attempt's batch/workers."""
        for attr in ("last", "best", "wdir"):
            path = getattr(trainer, attr, None)
            if path is not None:
                setattr(trainer, attr, atomic_path_class(type(path))(path))
        for key in ("batch", "workers"):
            value = self.overrides.get(key)
            if value is not None and getattr(trainer.args, key, None) != value:
                say("%s %s -> %s for this attempt" % (key, getattr(trainer.args, key, None), value))
                setattr(trainer.args, key, value)
        if self.overrides.get("batch") is not None:
            trainer.batch_size = self.overrides["batch"]

    def on_train_start(self, trainer):
        args = trainer.args
        self.epochs = int(trainer.epochs)
        start = int(getattr(trainer, "start_epoch", 0) or 0)
        results = os.path.join(str(trainer.save_dir), "results.csv")
        rows, events = drop_results_after(results, start), drop_events_from(self.events.path, start)
        if rows or events:
            say("starting at epoch %d: dropped %d results.csv row(s) and %d event(s) of that epoch and later"
                % (start + 1, rows, events))
        devices = [str(trainer.device)]
        try:
            import torch

            if trainer.device.type == "cuda":
                devices = [torch.cuda.get_device_name(trainer.device)]
        except Exception:
            pass
        resumed = None
        if getattr(trainer, "resume", False):
            resumed = {"path": str(args.resume if isinstance(args.resume, str) else args.model), "epoch": start,
                       "step": 0}
        config = {"model": str(args.model), "data": str(args.data), "epochs": self.epochs,
                  "batch_size": int(trainer.batch_size), "imgsz": args.imgsz, "device": str(args.device),
                  "workers": args.workers, "optimizer": str(args.optimizer), "lr0": to_float(args.lr0),
                  "freeze": args.freeze, "nbs": args.nbs}
        self.events.emit("start", backend="ultralytics", config=config, world_size=max(1, int(trainer.world_size)),
                         devices=devices, resumed_from=resumed, batches=len(trainer.train_loader),
                         save_dir=str(trainer.save_dir), start_epoch=start, epochs=self.epochs,
                         accumulate=int(getattr(trainer, "accumulate", 1) or 1), ultralytics=_version())

    def on_train_epoch_start(self, trainer):
        self.batch_i = 0
        self.epoch_started = self.last_emit = time.time()
        self.images_since = 0

    def on_train_batch_end(self, trainer):
        self.batch_i += 1
        self.steps += 1
        if self.delay:
            time.sleep(self.delay)
        self.images_since += int(trainer.batch_size)
        for kind, unit, at, _always in self.faults:
            if (unit == "epoch" and int(trainer.epoch) == at and self.batch_i == 1) or \
                    (unit == "step" and self.steps == at):
                raise_fault(kind)
        self.check_stop(trainer)
        if self.save_wanted:
            self.save_wanted = False
            self.save_now(trainer)
        batches = len(trainer.train_loader)
        now = time.time()
        if now - self.last_emit < BATCH_EVENT_INTERVAL_S and self.batch_i < batches:
            return
        rate = self.images_since / max(now - self.last_emit, 1e-6)
        self.last_emit, self.images_since = now, 0
        losses = {str(k).replace("_loss", ""): to_float(v) for k, v in dict(trainer.tloss or {}).items()}
        lr = None
        try:
            lr = float(trainer.optimizer.param_groups[0]["lr"])
        except Exception:
            pass
        self.events.emit("batch", epoch=int(trainer.epoch), epochs=int(trainer.epochs), batch=self.batch_i,
                         batches=batches, losses=losses, lr=lr, imgs_per_s=round(rate, 2), gpu_mem_gb=_gpu_mem())

    def on_fit_epoch_end(self, trainer):
        if self.final_eval:
            return  # ultralytics calls it once more for the final validation of best.pt: not an epoch
        self.epoch_event(trainer)
        self.check_stop(trainer)

    def epoch_event(self, trainer):
        """The epoch's event, once: from on_model_save (before the checkpoint's, so a kill right after a save
        never leaves a checkpointed epoch without it), else from on_fit_epoch_end."""
        if self.epoch_emitted == int(trainer.epoch):
            return
        self.epoch_emitted = int(trainer.epoch)
        self.fit_ended = time.time()
        metrics = dict(trainer.metrics or {})
        losses = {str(k).replace("_loss", ""): to_float(v) for k, v in dict(trainer.tloss or {}).items()}
        seconds = self.fit_ended - self.epoch_started if self.epoch_started else None
        self.events.emit(
            "epoch", epoch=int(trainer.epoch), epochs=int(trainer.epochs), losses=losses,
            metrics={"P": to_float(metrics.get("metrics/precision(B)")), "R": to_float(metrics.get("metrics/recall(B)")),
                     "mAP50": to_float(metrics.get("metrics/mAP50(B)")),
                     "mAP50-95": to_float(metrics.get("metrics/mAP50-95(B)"))},
            val_losses={k.split("/", 1)[1].replace("_loss", ""): to_float(v) for k, v in metrics.items()
                        if k.startswith("val/")},
            lr=[to_float(v) for v in dict(getattr(trainer, "lr", {}) or {}).values()],
            fitness=to_float(trainer.fitness), best_fitness=to_float(trainer.best_fitness),
            seconds=round(seconds, 3) if seconds is not None else None)

    def on_model_save(self, trainer):
        self.epoch_event(trainer)
        seconds = self.save_seconds
        paths = [str(trainer.last)]
        if trainer.best_fitness == trainer.fitness and os.path.exists(str(trainer.best)):
            paths.append(str(trainer.best))
        for path in paths:
            self.checkpoint_event(path, int(trainer.epoch) + 1, seconds=seconds, final=int(trainer.epoch) + 1 >=
                                  int(trainer.epochs))
        self.check_stop(trainer)

    def on_train_end(self, trainer):
        metrics = dict(trainer.metrics or {})
        self.events.emit("done", metrics={"P": to_float(metrics.get("metrics/precision(B)")),
                                          "R": to_float(metrics.get("metrics/recall(B)")),
                                          "mAP50": to_float(metrics.get("metrics/mAP50(B)")),
                                          "mAP50-95": to_float(metrics.get("metrics/mAP50-95(B)"))},
                         best=str(trainer.best), epochs=self.epochs, completed=self.completed)

    def checkpoint_event(self, path, epochs_done, seconds=None, **extra):
        try:
            size, digest = os.path.getsize(path), sha256_of(path)
        except OSError:
            return
        self.events.emit("checkpoint", path=path, epoch=epochs_done, step=0, bytes=size, sha256=digest,
                         seconds=round(seconds, 3) if seconds is not None else None, **extra)

    def save_now(self, trainer):
        """A checkpoint of the weights now, recorded as the last finished epoch (see the module docstring)."""
        epoch = int(trainer.epoch)
        if epoch <= int(getattr(trainer, "start_epoch", 0) or 0) and epoch == 0:
            say("save-now: still in the first epoch; ultralytics resumes only after a finished epoch, so there is "
                "nothing resumable to write yet (last.pt appears at the end of this epoch)")
            self.events.emit("warning", kind="save_now", message="save-now in the first epoch: nothing resumable "
                                                                 "to write yet (ultralytics resumes after a finished epoch)")
            return
        began = time.time()
        kept = (trainer.best, trainer.save_period)
        trainer.epoch, trainer.best, trainer.save_period = epoch - 1, Discard(), -1
        try:
            trainer.save_model()
        finally:
            trainer.epoch = epoch
            trainer.best, trainer.save_period = kept
        say("save-now: wrote %s at batch %d of epoch %d, recorded as epoch %d finished (a resume redoes epoch %d "
            "from its start with these weights)" % (trainer.last, self.batch_i, epoch + 1, epoch, epoch + 1))
        self.checkpoint_event(str(trainer.last), epoch, seconds=time.time() - began, mid_epoch=True,
                              batch=self.batch_i)

    def keep_unstripped(self, path):
        """Hard-link the final last.pt (optimizer and all) as last.unstripped.pt before ultralytics strips it."""
        if os.path.basename(str(path)) != "last.pt" or not os.path.exists(str(path)):
            return
        target = os.path.join(os.path.dirname(str(path)), UNSTRIPPED)
        tmp = "%s.tmp.%d" % (target, os.getpid())
        try:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            try:
                os.link(str(path), tmp)
            except OSError:
                import shutil

                shutil.copyfile(str(path), tmp)
            os.replace(tmp, target)
            self.saved_unstripped = True
            say("kept the final last.pt as %s (its optimizer lets `yolotui resume RUN --epochs N` extend the run)"
                % target)
        except OSError as exc:
            say("could not keep the final last.pt before it is stripped (%s): the run cannot be extended later" % exc)


def _gpu_mem():
    try:
        import torch

        if torch.cuda.is_available():
            return round(torch.cuda.memory_reserved() / 1e9, 3)
    except Exception:
        pass
    return None


def _version():
    try:
        from importlib import metadata

        return metadata.version("ultralytics")
    except Exception:
        return None


def _plain_function(method):
    """`method` as a plain function: ultralytics deep-copies its callback lists, which would copy the reporter
    behind a bound method (a function is copied as itself)."""

    def hook(trainer):
        return method(trainer)

    hook.__name__ = "yolotui_" + method.__name__
    return hook


def register(reporter):
    """Add the reporter's hooks to ultralytics' default callbacks (every trainer created from now on runs them)."""
    try:
        from ultralytics.utils.callbacks import base
    except ImportError:  # ultralytics 8.0.x kept it under ultralytics.yolo
        from ultralytics.yolo.utils.callbacks import base

    for event, method in reporter.hooks().items():
        base.default_callbacks.setdefault(event, []).append(_plain_function(method))


def patch_trainer(reporter):
    """Atomic strip of the final checkpoints (keeping last.pt unstripped first), the final-validation flag,
    and the trainer's save_dir forced to the run folder."""
    from pathlib import Path

    try:
        import ultralytics.engine.trainer as trainer_module
    except ImportError:  # ultralytics 8.0.x
        import ultralytics.yolo.engine.trainer as trainer_module

    original_strip = trainer_module.strip_optimizer

    def strip_optimizer(f="best.pt", s="", updates=None):
        if s:
            return original_strip(f, s, updates=updates)
        reporter.keep_unstripped(f)
        tmp = "%s.strip.%d.pt" % (f, os.getpid())
        result = original_strip(f, tmp, updates=updates)
        if os.path.exists(tmp):
            os.replace(tmp, str(f))
            fsync_dir(os.path.dirname(str(f)) or ".")
        return result

    trainer_module.strip_optimizer = strip_optimizer
    base_trainer = trainer_module.BaseTrainer
    original_final = base_trainer.final_eval

    def final_eval(self, *args, **kwargs):
        reporter.final_eval = True
        reporter.completed = reporter.completed or "%d epochs completed" % (int(self.epoch) - int(
            getattr(self, "start_epoch", 0) or 0) + 1)
        return original_final(self, *args, **kwargs)

    base_trainer.final_eval = final_eval
    original_save = base_trainer.save_model

    def save_model(self, *args, **kwargs):
        began = time.time()
        try:
            return original_save(self, *args, **kwargs)
        finally:
            reporter.save_seconds = time.time() - began

    base_trainer.save_model = save_model
    original_save_dir = trainer_module.get_save_dir

    def get_save_dir(args, name=None):
        if getattr(args, "save_dir", None) or getattr(args, "mode", "train") != "train":
            return original_save_dir(args, name)
        return Path(reporter.run_dir)

    trainer_module.get_save_dir = get_save_dir
