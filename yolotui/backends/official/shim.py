"""Run the official YOLOv9 trainer (train_dual.py, train.py, train_triple.py) in-process and report to yolotui.

Launched BY PATH with the trainer's own interpreter (the official Docker image's Python, say):

    PYTHON shim.py --repo REPO --script train_dual.py [--run-dir RUN] -- [train_dual.py flags]

Standard library only, Python >= 3.8, torch >= 1.11; it never imports yolotui, so nothing in the trainer's
environment needs yolotui's dependencies. What it does, in this order:

1. torch >= 2.6 loads with `weights_only=True` by default, which breaks the official resume, strip_optimizer,
   val and `--weights yolov9-c.pt` (their checkpoints pickle model classes). The shim wraps `torch.load` so
   that a load that did not choose `weights_only` itself stays weights-only, with an allow-list for this
   process: the classes defined in the official repository (models.*, utils.*), torch.nn module classes and
   numpy's array reconstruction. Any other global in a file is refused, naming it. It prints which applies.
2. It registers on the official `Callbacks` hooks (every Callbacks instance gets the shim's actions first)
   and reads the trainer's own values (epoch, nb, epochs, opt) from the `train()` frame that runs the hook,
   writing yolotui events to RUN/events.jsonl: start, batch (throttled), epoch, checkpoint, done, error.
3. On the first hook of a (re)started training it drops results.csv rows and events of the epoch it starts
   at and later, so a resumed epoch is never counted twice.
4. It watches the official logger for "N epochs completed": once seen, the training is finished, and a
   failure after it (strip_optimizer, the final validation, plotting) is reported as a warning with exit 0.

Event schema: docs/architecture.md, "Event types". RUN defaults to $YOLOTUI_RUN_DIR, the attempt to $YOLOTUI_ATTEMPT.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import runpy
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
_report = kit.load_beside(__file__, "shim_report")
SHIM_PREFIX, Reporter, say, classify = kit.SHIM_PREFIX, _report.Reporter, kit.say, kit.classify


COMPLETED_RE = re.compile(r"(\d+) epochs completed in ([\d.]+) hours")
OFFICIAL_MODULE_ROOTS = ("models", "utils")


# ------------------------------------------------------------------------------------------------ events



# ----------------------------------------------------------------------------------- torch >= 2.6 loads

def _torch_version(torch):
    numbers = re.findall(r"\d+", torch.__version__.split("+")[0])
    return tuple(int(n) for n in numbers[:2]) if len(numbers) >= 2 else (0, 0)


def _under(path, folder):
    try:
        return os.path.commonpath([os.path.realpath(path), os.path.realpath(folder)]) == os.path.realpath(folder)
    except ValueError:
        return False


def allowed_global(name, repo):
    """The object for the pickled global `name` when the allow-list admits it, else None.

    Admitted: classes defined in the official repository's models/ and utils/ packages (already imported
    or importable from REPO), torch.nn module classes, numpy's array/scalar reconstruction and dtypes.
    """
    import importlib

    module_name, _, attr = name.rpartition(".")
    if not module_name:
        return None
    numpy_names = {"numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct",
                   "numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar", "numpy.ndarray", "numpy.dtype"}
    official = module_name.split(".")[0] in OFFICIAL_MODULE_ROOTS
    if not (official or module_name.startswith("torch.nn.") or name in numpy_names
            or module_name == "numpy.dtypes"):
        return None
    try:
        module = sys.modules.get(module_name) or importlib.import_module(module_name)
        obj = getattr(module, attr)
    except Exception:
        return None
    if official:
        source = getattr(module, "__file__", None) or ""
        if not (isinstance(obj, type) and _under(source, repo)):
            return None
        return obj
    if module_name.startswith("torch.nn."):
        import torch

        return obj if isinstance(obj, type) and issubclass(obj, torch.nn.Module) else None
    if module_name == "numpy.dtypes":
        return obj if isinstance(obj, type) else None
    return obj


def install_load_policy(repo):
    """Wrap torch.load for torch >= 2.6 (see the module docstring); returns the line that says what applies."""
    try:
        import torch
    except ImportError:
        return "torch is not importable in this interpreter; the official code will fail to start"
    version = _torch_version(torch)
    if version < (2, 6):
        return ("torch %s unpickles fully by default (weights_only=False): the official loads work as they are; "
                "nothing changed" % torch.__version__)
    serialization = torch.serialization
    original = torch.load

    def load(f, *args, **kwargs):
        if "weights_only" in kwargs or len(args) >= 3 or not isinstance(f, (str, os.PathLike)):
            return original(f, *args, **kwargs)
        allowed, refused = [], []
        try:
            names = serialization.get_unsafe_globals_in_checkpoint(f)
        except Exception:
            names = []  # not a zip checkpoint: torch.load reports it
        for name in names:
            obj = allowed_global(name, repo)
            (allowed if obj is not None else refused).append(obj if obj is not None else name)
        if refused:
            raise RuntimeError(
                "%s refusing to unpickle %s: it references %s, which is not an official model class, torch.nn "
                "module or numpy array; if you trust the file, load it yourself with weights_only=False"
                % (SHIM_PREFIX, f, ", ".join(sorted(refused))))
        try:
            import numpy.dtypes as dtypes  # numpy >= 1.25: the dtype classes a pickled array names
            allowed += [getattr(dtypes, k) for k in dir(dtypes) if k.endswith("DType")]
        except ImportError:
            pass
        kwargs["weights_only"] = True
        with serialization.safe_globals(allowed):
            return original(f, *args, **kwargs)

    torch.load = load
    return ("torch %s loads weights_only=True by default: allow-listing, for this trainer process only, the "
            "official model classes (models.*, utils.* under %s), torch.nn modules and numpy arrays; any other "
            "pickled global is refused" % (torch.__version__, repo))


# ------------------------------------------------------------------------------------------------- hooks



class CompletionWatch(logging.Filter):
    """Sees the official "N epochs completed in H hours." line go by on its logger."""

    def __init__(self, reporter):
        logging.Filter.__init__(self)
        self.reporter = reporter

    def filter(self, record):
        try:
            match = COMPLETED_RE.search(record.getMessage())
        except Exception:
            match = None
        if match:
            self.reporter.completed = match.group(0)
        return True


def patch_callbacks(reporter):
    """Make every official Callbacks instance carry the reporter's actions (registered first)."""
    from utils.callbacks import Callbacks

    original_init = Callbacks.__init__

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        reporter.attach(self)

    Callbacks.__init__ = init


def watch_logger(reporter):
    """Attach the completion watch to the official logger (utils.general.LOGGER), if there is one."""
    try:
        import utils.general as general
    except Exception as exc:  # the script's own import reports the real problem
        say("cannot import utils.general (%s); completion is read from the log instead" % exc)
        return
    logger = getattr(general, "LOGGER", None)
    if isinstance(logger, logging.Logger):
        logger.addFilter(CompletionWatch(reporter))


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="shim.py", description=__doc__.split("\n")[0])
    parser.add_argument("--repo", required=True, help="the official YOLOv9 checkout")
    parser.add_argument("--script", default="train_dual.py", help="train_dual.py, train.py or train_triple.py")
    parser.add_argument("--run-dir", default=os.environ.get("YOLOTUI_RUN_DIR"), help="the yolotui run folder")
    if "--" in argv:
        cut = argv.index("--")
        own, rest = argv[:cut], argv[cut + 1:]
    else:
        own, rest = argv, []
    args = parser.parse_args(own)
    return args, rest


def main(argv=None):
    """Run the official script with the shim's hooks; returns the exit code."""
    args, script_args = parse_args(sys.argv[1:] if argv is None else argv)
    repo = os.path.realpath(args.repo)
    script = os.path.join(repo, args.script)
    if not os.path.isfile(script):
        print("%s error: %s not found; --repo must be a checkout of the official YOLOv9 repository" % (SHIM_PREFIX,
              script), file=sys.stderr)
        return 2
    run_dir = os.path.realpath(args.run_dir or os.getcwd())
    attempt = int(os.environ.get("YOLOTUI_ATTEMPT", "1") or 1)
    reporter = Reporter(run_dir, attempt)
    say("python %s; running %s %s" % (sys.version.split()[0], script, " ".join(script_args)))
    sys.path.insert(0, repo)
    say(install_load_policy(repo))
    try:
        patch_callbacks(reporter)
    except Exception as exc:
        say("cannot hook the official Callbacks (%s): no live progress for this run" % exc)
    watch_logger(reporter)
    sys.argv = [script] + list(script_args)
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if code and reporter.completed:
            say("training finished (%s); the script then exited with code %s" % (reporter.completed, code))
            return 0
        if code:
            reporter.events.emit("error", kind="crash", message="the official script exited with code %s" % code,
                                 traceback="")
        return code
    except BaseException as exc:  # report, then fail like the official script would
        text = traceback.format_exc()
        tail = "\n".join(text.splitlines()[-15:])
        message = "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[0] if str(exc).strip() else "")
        if reporter.completed:
            reporter.events.emit("warning", kind="post_training", message=message, traceback=tail)
            sys.stderr.write(text)
            say("training finished (%s); a later official step failed: %s. The weights are in %s/weights"
                % (reporter.completed, message, reporter.save_dir))
            reporter.events.emit("done", metrics={}, best=os.path.join(reporter.save_dir, "weights", "best.pt"),
                                 epochs=reporter.epochs, completed=reporter.completed, after_error=message)
            return 0
        if isinstance(exc, KeyboardInterrupt):
            raise
        kind = classify(exc, text)
        reporter.events.emit("error", kind=kind, message=message, traceback=tail)
        sys.stderr.write(text)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
