"""The official shim's reporter: yolotui events (start, batch, epoch, checkpoint, done, error) from the official
trainer's own values, written to RUN/events.jsonl, and the drop of a resumed epoch's rows and events.

Part of the shim (shim.py, run by path in the trainer's interpreter, loads it through the shim kit): standard
library only, Python >= 3.8, never imports yolotui there; the events, atomic writes and rewinds are the kit's
(yolotui/backends/shimkit.py). Its values come from the `train()` frame that runs each official Callbacks hook.
"""

from __future__ import annotations

import importlib
import os
import sys
import time

# The kit shim.py loaded by path (it runs without yolotui); in yolotui's own process (its tests), the package's.
kit = sys.modules.get("yolotui_shimkit") or importlib.import_module("yolotui.backends.shimkit")
SHIM_PREFIX, say, Events, sha256_of = kit.SHIM_PREFIX, kit.say, kit.Events, kit.sha256_of
BATCH_EVENT_INTERVAL_S = 0.5


def _float(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        try:
            return float(value.item())
        except Exception:
            return None


def drop_results_from(path, epoch):
    """Rewrite results.csv without rows of `epoch` and later (the header and earlier rows kept as written)."""
    return kit.drop_rows(path, lambda at: at >= epoch)


def drop_events_from(path, epoch):
    """Drop batch/epoch events of `epoch` and later, checkpoints past it and done events (a bounded rewind)."""
    def later(event):
        kind = event.get("type")
        at = int(event.get("epoch", 0) or 0)
        return kind in ("batch", "epoch") and at >= epoch or kind == "checkpoint" and at > epoch or kind == "done"

    return kit.drop_events(path, later)


def train_locals():
    """The local variables of the official `train()` running the current hook ({} when not found)."""
    frame = sys._getframe(2)
    depth = 0
    while frame is not None and depth < 12:
        if frame.f_code.co_name == "train" and "epochs" in frame.f_locals:
            return frame.f_locals
        frame = frame.f_back
        depth += 1
    return {}


def _opt_dict(opt):
    try:
        return dict(vars(opt))
    except TypeError:
        return {}


class Reporter:
    """The shim's actions on the official Callbacks hooks."""

    def __init__(self, run_dir, attempt):
        self.run_dir = run_dir
        self.events = Events(os.path.join(run_dir, "events.jsonl"), attempt)
        self.completed = None  # the "N epochs completed" line, once logged
        self.epochs = None
        self.epoch = None
        self.epoch_started = None
        self.last_batch_emit = 0.0
        self.images_since = 0
        self.last_fit_epoch = None
        self.fit_ended = None
        self.save_dir = run_dir
        self.started = False

    def attach(self, callbacks):
        for hook in ("on_train_start", "on_train_epoch_start", "on_train_batch_end", "on_fit_epoch_end",
                     "on_model_save", "on_train_end"):
            try:
                callbacks.register_action(hook, name="yolotui", callback=getattr(self, hook))
            except (AssertionError, KeyError):
                say("this trainer has no %r hook; that part of the progress is not reported" % hook)

    def on_train_start(self, *args, **kwargs):
        local = train_locals()
        opt = _opt_dict(local.get("opt"))
        self.epochs = int(local.get("epochs") or opt.get("epochs") or 0)
        start_epoch = int(local.get("start_epoch") or 0)
        self.save_dir = str(local.get("save_dir") or opt.get("save_dir") or self.run_dir)
        results = os.path.join(self.save_dir, "results.csv")
        dropped_rows = drop_results_from(results, start_epoch)
        dropped_events = drop_events_from(self.events.path, start_epoch)
        if dropped_rows or dropped_events:
            say("starting at epoch %d: dropped %d results.csv row(s) and %d event(s) of that epoch and later"
                % (start_epoch, dropped_rows, dropped_events))
        device = local.get("device")
        devices = [str(device)] if device is not None else []
        try:
            import torch

            if device is not None and getattr(device, "type", "") == "cuda":
                devices = [torch.cuda.get_device_name(device)]
        except Exception:
            pass
        resumed = None
        if opt.get("resume"):
            resumed = {"path": str(opt.get("weights") or ""), "epoch": start_epoch, "step": 0}
        keys = ("cfg", "data", "epochs", "batch_size", "imgsz", "optimizer", "weights", "device", "workers")
        self.events.emit("start", backend="official", config={k: opt.get(k) for k in keys},
                         world_size=int(os.environ.get("WORLD_SIZE", "1") or 1), devices=devices,
                         resumed_from=resumed, batches=local.get("nb"), save_dir=self.save_dir,
                         start_epoch=start_epoch, epochs=self.epochs)
        self.started = True

    def on_train_epoch_start(self, *args, **kwargs):
        local = train_locals()
        self.epoch = local.get("epoch")
        self.epoch_started = time.time()
        self.last_batch_emit = time.time()
        self.images_since = 0

    def on_train_batch_end(self, model=None, ni=None, imgs=None, targets=None, paths=None, vals=None, *args):
        local = train_locals()
        try:
            self.images_since += int(imgs.shape[0])
        except Exception:
            pass
        i, nb = local.get("i"), local.get("nb")
        now = time.time()
        last = i is not None and nb is not None and int(i) + 1 >= int(nb)
        if now - self.last_batch_emit < BATCH_EVENT_INTERVAL_S and not last:
            return
        rate = self.images_since / max(now - self.last_batch_emit, 1e-6)
        self.last_batch_emit, self.images_since = now, 0
        losses = [_float(v) for v in (vals or [])]
        lr = None
        optimizer = local.get("optimizer")
        if optimizer is not None:
            try:
                lr = float(optimizer.param_groups[0]["lr"])
            except Exception:
                lr = None
        gpu = None
        try:
            import torch

            if torch.cuda.is_available():
                gpu = round(torch.cuda.memory_reserved() / 1e9, 3)
        except Exception:
            pass
        epoch = local.get("epoch", self.epoch)
        self.events.emit("batch", epoch=epoch, epochs=int(local.get("epochs") or self.epochs or 0),
                         batch=(int(i) + 1) if i is not None else None, batches=nb,
                         losses=dict(zip(("box", "cls", "dfl"), losses)), lr=lr,
                         imgs_per_s=round(rate, 2), gpu_mem_gb=gpu)

    def on_fit_epoch_end(self, vals=None, epoch=None, best_fitness=None, fi=None, *args):
        vals = [_float(v) for v in (vals or [])]
        if epoch is None:
            return
        epoch = int(epoch)
        if epoch == self.last_fit_epoch:  # the official COCO path repeats the last epoch after the final val
            return
        drop_results_from(os.path.join(self.save_dir, "results.csv"), epoch)  # a leftover row of this epoch
        self.last_fit_epoch = epoch
        self.fit_ended = time.time()
        seconds = self.fit_ended - self.epoch_started if self.epoch_started else None
        self.events.emit("epoch", epoch=epoch, epochs=self.epochs,
                         losses=dict(zip(("box", "cls", "dfl"), vals[0:3])),
                         metrics=dict(zip(("P", "R", "mAP50", "mAP50-95"), vals[3:7])),
                         val_losses=dict(zip(("box", "cls", "dfl"), vals[7:10])), lr=vals[10:13],
                         fitness=_float(fi), best_fitness=_float(best_fitness),
                         seconds=round(seconds, 3) if seconds is not None else None)

    def on_model_save(self, last=None, epoch=None, final_epoch=None, best_fitness=None, fi=None, *args):
        seconds = time.time() - self.fit_ended if self.fit_ended else None
        paths = [str(last)] if last is not None else []
        best = os.path.join(os.path.dirname(str(last)), "best.pt") if last is not None else None
        if best and _float(best_fitness) == _float(fi) and os.path.exists(best):
            paths.append(best)
        for path in paths:
            try:
                size, digest = os.path.getsize(path), sha256_of(path)
            except OSError:
                continue
            # epoch: the epochs done (the epoch a resume starts at), as yolotui's own checkpoints count it
            self.events.emit("checkpoint", path=path, epoch=int(epoch) + 1, step=0, bytes=size, sha256=digest,
                             seconds=round(seconds, 3) if seconds is not None else None,
                             official_epoch=int(epoch), final=bool(final_epoch))

    def on_train_end(self, last=None, best=None, epoch=None, results=None, *args):
        metrics = [_float(v) for v in list(results or [])[:4]]
        self.events.emit("done", metrics=dict(zip(("P", "R", "mAP50", "mAP50-95"), metrics)),
                         best=str(best) if best is not None else None, epochs=self.epochs,
                         completed=self.completed)
