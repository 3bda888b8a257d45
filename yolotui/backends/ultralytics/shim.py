"""Run an ultralytics training in-process and report it to yolotui (events.jsonl), in the user's interpreter.

Launched BY PATH with the interpreter that has ultralytics (ultralytics is AGPL-3.0: yolotui never imports it
itself; this file is the only part of yolotui that runs beside it, in that separate process):

    PYTHON shim.py --yolotui-run-dir RUN --yolotui-mode cli -- train model=yolov9t.yaml data=D ...
    PYTHON shim.py --yolotui-run-dir RUN --yolotui-mode script -- train.py [its arguments]
    ... [--yolotui-resume RUN/weights/last.pt] [--yolotui-batch N] [--yolotui-workers N] [--yolotui-device D]

Flags starting with `--yolotui-` are the shim's own wherever they stand (the supervisor appends its resume and
remedy flags at the end); everything else after `--` is the user's command. yolotui's part is standard library
only (Python >= 3.8): this file and its helpers beside it, shim_files.py (events, atomic writes, the rows a resume
drops) and shim_safety.py (the unpickling allow-list, failure classes, test faults), loaded by path; ultralytics
is imported only inside functions, after sys.argv is set for it.

What it does:

1. Registers on ultralytics' default callbacks (on_pretrain_routine_start, on_train_start,
   on_train_epoch_start, on_train_batch_end, on_fit_epoch_end, on_model_save, on_train_end) and writes
   yolotui's events (DESIGN.md, "Event schema"), one whole line per os.write on an O_APPEND descriptor:
   start, batch (throttled), epoch, checkpoint, done, error, warning, stop.
2. Makes ultralytics' checkpoint writes atomic (last.pt, best.pt, epochN.pt are written in place by
   ultralytics: here to a temporary file, fsynced, then renamed), keeps the final last.pt before ultralytics
   strips its optimizer as weights/last.unstripped.pt (a hard link: no copy, no space) so a finished run can be
   extended, and forces the trainer's save_dir to the run folder.
3. On a (re)start drops results.csv rows and events of the epoch it starts at and later: no epoch twice.
4. Resumes the ultralytics way: `--yolotui-resume LAST` runs `YOLO(LAST).train(resume=LAST, batch=..)`
   (ultralytics logs "Resuming training ..."), not the user's command.
5. SIGUSR1 (yolotui save): at the next batch, a checkpoint of the weights now, recorded as the last finished
   epoch (ultralytics resumes at epoch boundaries: the resume redoes the epoch in progress instead of skipping
   its rest), best.pt untouched; in the first epoch there is nothing ultralytics could resume, so it says so.
   SIGTERM/SIGINT: training stops at the next batch; last.pt stays the last epoch's.
6. Loads of checkpoint files are scanned first (torch >= 2.5): a file that pickles a global outside the
   allow-list (ultralytics' own classes, torch.nn modules, numpy arrays) is refused, naming it.
7. `--yolotui-rewrite-epochs M --yolotui-checkpoint SRC --yolotui-output DST` (yolotui resume --epochs):
   writes SRC with train_args epochs = M to DST atomically, prints one JSON line. `--yolotui-probe` prints the
   versions of Python, torch and ultralytics (package metadata, nothing imported).

Testing aids (not features): YOLOTUI_FAULT=KIND@epoch=E or KIND@step=K (oom, comm, nan, crash; first attempt
only, `:always` for every attempt) and YOLOTUI_STEP_DELAY_S (a sleep per batch of the first attempt).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback


def _sibling(name):
    """The module `name`.py beside this file, loaded by path (this file runs without yolotui on sys.path)."""
    import importlib.util

    key = "yolotui_ultralytics_" + name
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, os.path.join(os.path.dirname(os.path.realpath(__file__)),
                                                                        name + ".py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


_files, _safety = _sibling("shim_files"), _sibling("shim_safety")
SHIM_PREFIX, say, Events, Discard = _files.SHIM_PREFIX, _files.say, _files.Events, _files.Discard
atomic_write, atomic_path_class, fsync_dir = _files.atomic_write, _files.atomic_path_class, _files.fsync_dir
drop_results_after, drop_events_from, sha256_of = _files.drop_results_after, _files.drop_events_from, _files.sha256_of
to_float = _files.to_float
allowed_global, install_load_policy, classify = _safety.allowed_global, _safety.install_load_policy, _safety.classify
parse_faults, raise_fault = _safety.parse_faults, _safety.raise_fault

BATCH_EVENT_INTERVAL_S = 0.5
VALUE_FLAGS = ("--yolotui-run-dir", "--yolotui-mode", "--yolotui-resume", "--yolotui-batch", "--yolotui-workers",
               "--yolotui-device", "--yolotui-rewrite-epochs", "--yolotui-checkpoint", "--yolotui-output")
BARE_FLAGS = ("--yolotui-probe",)
UNSTRIPPED = "last.unstripped.pt"


class StopTraining(BaseException):
    """Raised from a hook to end training at a batch boundary (a stop signal)."""


# ------------------------------------------------------------------------------------------------ hooks

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

    # -- signals --------------------------------------------------------------------------------------
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

    # -- hooks ----------------------------------------------------------------------------------------
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

    # -- checkpoints ----------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------------- commands

def split_argv(argv):
    """({own flag: value}, the user's command): `--yolotui-*` flags anywhere, the command after the first `--`."""
    own, rest, i = {}, [], 0
    while i < len(argv):
        token = argv[i]
        flag, eq, inline = token.partition("=")
        if flag in VALUE_FLAGS:
            if eq:
                own[flag] = inline
                i += 1
            elif i + 1 < len(argv):
                own[flag] = argv[i + 1]
                i += 2
            else:
                raise SystemExit("%s %s needs a value" % (SHIM_PREFIX, flag))
            continue
        if token in BARE_FLAGS:
            own[token] = True
            i += 1
            continue
        rest.append(token)
        i += 1
    if "--" in rest:
        rest = rest[rest.index("--") + 1:]
    return own, rest


def probe():
    """Versions of Python, torch and ultralytics in this interpreter (package metadata only), as JSON."""
    from importlib import metadata

    found = {"python": sys.version.split()[0], "executable": sys.executable}
    for name in ("torch", "ultralytics", "numpy"):
        try:
            found[name] = metadata.version(name)
        except Exception:
            found[name] = None
    print(json.dumps(found))
    return 0


def rewrite_epochs(source, output, epochs):
    """Write `source` with train_args['epochs'] = `epochs` to `output` (atomically); print a JSON line."""
    import io

    import torch

    install_load_policy()
    try:
        ckpt = torch.load(source, map_location="cpu", weights_only=False)  # scanned by the policy just installed
    except Exception as exc:
        print(json.dumps({"error": "%s: %s" % (source, str(exc).strip().splitlines()[0] if str(exc).strip() else
                                               type(exc).__name__)}))
        return 2
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("train_args"), dict):
        print(json.dumps({"error": "%s is not an ultralytics training checkpoint (no train_args)" % source}))
        return 2
    was = ckpt["train_args"].get("epochs")
    ckpt["train_args"]["epochs"] = int(epochs)
    buffer = io.BytesIO()
    torch.save(ckpt, buffer)
    atomic_write(output, buffer.getvalue())
    print(json.dumps({"epochs_was": was, "epochs_now": int(epochs), "epoch": ckpt.get("epoch"),
                      "optimizer": ckpt.get("optimizer") is not None, "output": output}))
    return 0


def _int_flag(own, flag):
    value = own.get(flag)
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError:
        raise SystemExit("%s %s %s: give a whole number" % (SHIM_PREFIX, flag, value)) from None


def run_training(own, user):
    """Run the user's ultralytics training (or the ultralytics resume) with the hooks; returns the exit code."""
    run_dir = os.path.realpath(own.get("--yolotui-run-dir") or os.environ.get("YOLOTUI_RUN_DIR") or os.getcwd())
    attempt = int(os.environ.get("YOLOTUI_ATTEMPT", "1") or 1)
    mode = own.get("--yolotui-mode") or "cli"
    resume = own.get("--yolotui-resume")
    overrides = {"batch": _int_flag(own, "--yolotui-batch"), "workers": _int_flag(own, "--yolotui-workers")}
    device = own.get("--yolotui-device")
    reporter = Reporter(run_dir, attempt, overrides)
    if mode == "script" and not resume:
        if not user:
            print("%s error: no script given after --" % SHIM_PREFIX, file=sys.stderr)
            return 2
        sys.argv = list(user)
    else:
        sys.argv = ["yolo"] + list(user)
    say("python %s; %s" % (sys.version.split()[0], "resuming from %s" % resume if resume else
                           "running %s %s" % ("yolo" if mode == "cli" else "", " ".join(user))))
    reporter.install_signals()
    try:
        register(reporter)
    except Exception as exc:  # an ultralytics the shim does not know: the run goes on, read from its files
        say("cannot hook ultralytics' callbacks (%s): no live progress; yolotui follows results.csv and this log"
            % exc)
    try:
        patch_trainer(reporter)
    except Exception as exc:
        say("cannot patch ultralytics' trainer (%s): its checkpoint writes stay in place (not atomic) and a "
            "finished run cannot be extended" % exc)
    say(install_load_policy())
    try:
        if resume:
            from ultralytics import YOLO

            kwargs = {k: v for k, v in overrides.items() if v is not None}
            if device:
                kwargs["device"] = device
            YOLO(resume).train(resume=resume, **kwargs)
        elif mode == "script":
            import runpy

            runpy.run_path(user[0], run_name="__main__")
        else:
            try:
                import ultralytics.cfg as cfg
            except ImportError:  # ultralytics 8.0.x
                import ultralytics.yolo.cfg as cfg

            cfg.ARGV = sys.argv  # captured when ultralytics.utils was imported
            if device:
                sys.argv.append("device=%s" % device)
            cfg.entrypoint()
    except StopTraining:
        return 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if code and reporter.final_eval:
            say("training finished (%s); the script then exited with code %s" % (reporter.completed, code))
            return 0
        if code:
            reporter.events.emit("error", kind="crash", message="the command exited with code %s" % code,
                                 traceback="")
        return code
    except BaseException as exc:  # report, then fail as ultralytics would
        text = traceback.format_exc()
        tail = "\n".join(text.splitlines()[-15:])
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        message = "%s: %s" % (type(exc).__name__, first)
        if reporter.final_eval:
            reporter.events.emit("warning", kind="post_training", message=message, traceback=tail)
            sys.stderr.write(text)
            say("training finished (%s); a later ultralytics step failed: %s. The weights are in %s/weights"
                % (reporter.completed, message, run_dir))
            reporter.events.emit("done", metrics={}, best=os.path.join(run_dir, "weights", "best.pt"),
                                 epochs=reporter.epochs, completed=reporter.completed, after_error=message)
            return 0
        if isinstance(exc, KeyboardInterrupt):
            raise
        reporter.events.emit("error", kind=classify(exc, text), message=message, traceback=tail)
        sys.stderr.write(text)
        return 1
    return 0


def main(argv=None):
    """Entry point; see the module docstring."""
    here = os.path.dirname(os.path.realpath(__file__))
    if sys.path and os.path.realpath(sys.path[0] or ".") == here:
        del sys.path[0]  # run by path: this package's modules must not shadow the user's
    own, user = split_argv(sys.argv[1:] if argv is None else list(argv))
    if own.get("--yolotui-probe"):
        return probe()
    if own.get("--yolotui-rewrite-epochs"):
        return rewrite_epochs(own.get("--yolotui-checkpoint"), own.get("--yolotui-output"),
                              _int_flag(own, "--yolotui-rewrite-epochs"))
    return run_training(own, user)


if __name__ == "__main__":
    sys.exit(main())
