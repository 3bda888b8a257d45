"""The ultralytics checkpoint layout, read without torch (yolotui.health.checkpoint calls this).

An ultralytics .pt (engine/train/trainer.py `save_model`) is a dict: `epoch` (the last finished 0-based epoch; -1 once
`strip_optimizer` has run at the end of training), `best_fitness`, `model` (None while training), `ema` (a
pickled `ultralytics.nn.tasks.DetectionModel`), `updates`, `optimizer`, `scaler`, `train_args` (the training
arguments: total `epochs`, `data`, `batch` ...), `train_metrics`, `train_results` (results.csv as columns),
`date` and `version`. A stripped one has `model` = the EMA, and None for optimizer, ema, updates, scaler.

Its pickled classes are judged against an allow-list: ultralytics' own classes, torch.nn modules, numpy's array
reconstruction and a few plain types; anything else is named. The shim applies the same rule before the
trainer unpickles a file (yolotui/backends/ultralytics/shim.py).
"""

from __future__ import annotations

from typing import Any

ALLOWED_MODULE_PREFIXES = ("ultralytics.", "torch.nn.", "numpy.")
ALLOWED_NAMES = frozenset({"types.SimpleNamespace", "argparse.Namespace", "pathlib.PosixPath", "pathlib.WindowsPath",
                           "pathlib.Path"})


def is_ultralytics(top: dict[Any, Any]) -> bool:
    """True for the top-level dict of an ultralytics checkpoint (train_args beside epoch, with version or date)."""
    return "train_args" in top and "epoch" in top and ("version" in top or "date" in top)


def allowed(name: str) -> bool:
    """Whether the pickled global `name` ('module.attr') is on the ultralytics allow-list."""
    return name in ALLOWED_NAMES or name.startswith(ALLOWED_MODULE_PREFIXES)


def outside_allow_list(classes: list[str]) -> list[str]:
    """The pickled globals of `classes` that the allow-list does not admit."""
    return [name for name in classes if not allowed(name)]


def _results_epochs(value: Any) -> int | None:
    """Epochs recorded in `train_results` (results.csv as columns; its epoch column counts from 1)."""
    if not isinstance(value, dict):
        return None
    column = value.get("epoch")
    if not isinstance(column, list) or not column:
        return None
    numbers = [v for v in column if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return int(max(numbers)) if numbers else None


def fill(info: Any, top: dict[Any, Any], total: int | None) -> None:
    """Set the ultralytics facts on a CheckpointInfo: epochs done, versions, date, class names."""
    epoch = info.epoch
    recorded = _results_epochs(top.get("train_results"))
    if epoch is None:
        info.epochs_done = None
    elif epoch == -1:  # stripped at the end of training: the results say how far it got (early stop)
        info.epochs_done = recorded if recorded is not None else total
    else:
        info.epochs_done = epoch + 1
    version = top.get("version")
    info.versions = {"ultralytics": version} if isinstance(version, str) else info.versions
    if info.names is None and isinstance(info.opt, dict) and isinstance(info.opt.get("names"), (list, dict)):
        info.names = info.opt.get("names")


def describe_classes(classes: list[str]) -> str:
    """The verdict's line about the pickled classes of an ultralytics checkpoint."""
    outside = outside_allow_list(classes)
    if outside:
        return (f"pickles {', '.join(outside[:3])}, outside the ultralytics allow-list (ultralytics classes, "
                "torch.nn modules, numpy arrays): yolotui's shim refuses to load it")
    return ("ultralytics layout: its pickled classes are all on the allow-list (ultralytics classes, torch.nn "
            "modules); read by scanning, never unpickled")
