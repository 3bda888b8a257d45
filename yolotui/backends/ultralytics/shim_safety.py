"""The ultralytics shim's safety rules: which pickled globals a checkpoint may name and the injected faults
(testing aids); the failure classes are the shim kit's. Standard library only; loaded by path by shim.py.
"""

from __future__ import annotations

import importlib
import os
import re
import sys

# The kit shim.py loaded by path (it runs without yolotui); in yolotui's own process (its tests), the package's.
kit = sys.modules.get("yolotui_shimkit") or importlib.import_module("yolotui.backends.shimkit")
SHIM_PREFIX, say = kit.SHIM_PREFIX, kit.say
ALLOWED_EXTRA = ("types.SimpleNamespace", "argparse.Namespace", "pathlib.PosixPath", "pathlib.WindowsPath",
                 "pathlib.Path", "numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct",
                 "numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar", "numpy.ndarray", "numpy.dtype")


def allowed_global(name):
    """The object for the pickled global `name` when the allow-list admits it, else None: classes of the
    installed ultralytics package, torch.nn module classes, numpy's array reconstruction and a few plain types."""
    import importlib

    module_name, _, attr = name.rpartition(".")
    if not module_name:
        return None
    root = module_name.split(".")[0]
    if not (root == "ultralytics" or module_name.startswith("torch.nn.") or name in ALLOWED_EXTRA
            or module_name == "numpy.dtypes"):
        return None
    try:
        obj = getattr(sys.modules.get(module_name) or importlib.import_module(module_name), attr)
    except Exception:
        return None
    if root == "ultralytics" or module_name.startswith("torch.nn.") or module_name == "numpy.dtypes":
        return obj if isinstance(obj, type) else None
    return obj


def install_load_policy():
    """Scan every checkpoint file before torch unpickles it (see the module docstring); returns what applies."""
    try:
        import torch
    except ImportError:
        return "torch is not importable in this interpreter; ultralytics will fail to start"
    scan = getattr(torch.serialization, "get_unsafe_globals_in_checkpoint", None)
    if scan is None:
        return ("torch %s has no checkpoint scan: ultralytics unpickles its files fully, as it does without yolotui"
                % torch.__version__)
    original = torch.load

    def load(f, *args, **kwargs):
        if isinstance(f, (str, os.PathLike)):
            try:
                names = scan(f)
            except Exception:
                names = []  # not a zip checkpoint: torch.load reports it
            refused = sorted(n for n in names if allowed_global(n) is None)
            if refused:
                raise RuntimeError(
                    "%s refusing to unpickle %s: it references %s, which is not an ultralytics class, torch.nn "
                    "module or numpy array; if you trust the file, load it yourself outside yolotui's shim"
                    % (SHIM_PREFIX, f, ", ".join(refused[:5])))
        return original(f, *args, **kwargs)

    torch.load = load
    return ("torch %s: every checkpoint is scanned before it is unpickled; only ultralytics' classes, torch.nn "
            "modules and numpy arrays are allowed (ultralytics loads with weights_only=False)" % torch.__version__)


# ----------------------------------------------------------------------------------------------- faults

def parse_faults(text):
    """[(kind, 'epoch'|'step', number, always)] from YOLOTUI_FAULT (unknown entries are ignored, said once)."""
    faults = []
    for part in (text or "").split(","):
        match = re.match(r"^\s*(oom|comm|nan|crash)@(epoch|step)=(\d+)(:always)?\s*$", part)
        if match:
            faults.append((match.group(1), match.group(2), int(match.group(3)), bool(match.group(4))))
        elif part.strip():
            say("YOLOTUI_FAULT entry %r not understood (KIND@epoch=E or KIND@step=K; oom, comm, nan, crash)" % part)
    return faults


def raise_fault(kind):
    """Fail the way real training fails."""
    if kind == "oom":
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (injected by yolotui's shim: "
                           "YOLOTUI_FAULT)")
    if kind == "comm":
        raise ConnectionResetError("Connection reset by peer (injected by yolotui's shim: YOLOTUI_FAULT)")
    if kind == "nan":
        raise RuntimeError("Training failed: NaN persisted for 4 epochs (injected by yolotui's shim: YOLOTUI_FAULT)")
    raise RuntimeError("crash injected by yolotui's shim (YOLOTUI_FAULT)")
