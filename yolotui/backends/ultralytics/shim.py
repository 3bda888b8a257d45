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
   yolotui's events (docs/architecture.md, "Event types"), one whole line per os.write on an O_APPEND descriptor:
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
import sys
import traceback


def _kit():
    """yolotui's shim kit (../shimkit.py), loaded by path: this file runs without yolotui on sys.path."""
    import importlib.util

    if "yolotui_shimkit" not in sys.modules:
        path = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "shimkit.py")
        spec = importlib.util.spec_from_file_location("yolotui_shimkit", path)
        sys.modules["yolotui_shimkit"] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules["yolotui_shimkit"]


kit = _kit()
_files, _safety = kit.load_beside(__file__, "shim_files"), kit.load_beside(__file__, "shim_safety")
SHIM_PREFIX, say, Events, Discard = kit.SHIM_PREFIX, kit.say, kit.Events, _files.Discard
atomic_write, atomic_path_class, fsync_dir = kit.atomic_write, _files.atomic_path_class, kit.fsync_dir
drop_results_after, drop_events_from, sha256_of = _files.drop_results_after, _files.drop_events_from, kit.sha256_of
to_float, classify = kit.to_float, kit.classify
allowed_global, install_load_policy = _safety.allowed_global, _safety.install_load_policy
parse_faults, raise_fault = _safety.parse_faults, _safety.raise_fault
_hooks = kit.load_beside(__file__, "shim_hooks")
Reporter, StopTraining, register, patch_trainer = _hooks.Reporter, _hooks.StopTraining, _hooks.register, _hooks.patch_trainer
UNSTRIPPED = _hooks.UNSTRIPPED

VALUE_FLAGS = ("--yolotui-run-dir", "--yolotui-mode", "--yolotui-resume", "--yolotui-batch", "--yolotui-workers",
               "--yolotui-device", "--yolotui-rewrite-epochs", "--yolotui-checkpoint", "--yolotui-output")
BARE_FLAGS = ("--yolotui-probe",)


# ------------------------------------------------------------------------------------------------ hooks



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
