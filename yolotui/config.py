"""Training options and hyperparameters: official train_dual.py names and defaults, YAML I/O, validation.

Torch-free: the CLI validates everything here before anything detaches, so a typo fails in a blink with a
one-line UserError instead of minutes later inside a background process. CUDA devices are counted through
NVML (nvidia-ml-py), never by importing torch.
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from yolotui import safe_yaml
from yolotui.devices import device_string, parse_device
from yolotui.errors import UserError
from yolotui.runs.atomic import atomic_write_text

# Options the trainer understands, under their official argparse names (dest form), with official defaults.
# `save_period_min` is yolotui's own: minutes between mid-epoch last.pt checkpoints.
TRAIN_DEFAULTS: dict[str, Any] = {
    "weights": "",
    "cfg": "",
    "data": "",
    "hyp": "hyp.scratch-high.yaml",
    "epochs": 100,
    "batch_size": 16,
    "imgsz": 640,
    "device": "",
    "workers": 8,
    "project": "runs/train",
    "name": "exp",
    "exist_ok": False,
    "close_mosaic": 0,
    "min_items": 0,
    "freeze": [0],
    "cos_lr": False,
    "flat_cos_lr": False,
    "fixed_lr": False,
    "label_smoothing": 0.0,
    "patience": 100,
    "save_period": -1,
    "seed": 0,
    "optimizer": "SGD",
    "cache": None,
    "single_cls": False,
    "save_period_min": 10.0,
    "sync_bn": False,
    "precision": "auto",
    "compile": False,
}

# Official opt.yaml keys yolotui does not act on, written with the values it behaves as.
FIXED_OFFICIAL_KEYS: dict[str, Any] = {
    "rect": False,
    "nosave": False,
    "noval": False,
    "noautoanchor": False,
    "noplots": True,
    "evolve": None,
    "bucket": "",
    "image_weights": False,
    "multi_scale": False,
    "quad": False,
    "local_rank": -1,
}

OPTIMIZERS = ("SGD", "Adam", "AdamW")
PRECISIONS = ("auto", "fp32")  # the training forward pass: see yolotui.engine.train.precision

# Hyperparameters the engine reads; a hyp file missing one of them is rejected.
REQUIRED_HYP_KEYS = (
    "lr0", "lrf", "momentum", "weight_decay", "warmup_epochs", "warmup_momentum", "warmup_bias_lr",
    "box", "cls", "dfl", "hsv_h", "hsv_s", "hsv_v", "degrees", "translate", "scale", "shear",
    "perspective", "flipud", "fliplr", "mosaic", "mixup",
)

GRID = 32  # largest model stride: image sizes are multiples of it


def default_options(**overrides: Any) -> dict[str, Any]:
    """A fresh copy of the defaults with `overrides` applied (unknown keys are an error)."""
    opt = copy.deepcopy(TRAIN_DEFAULTS)
    for key, value in overrides.items():
        if key not in opt:
            raise UserError(f"unknown training option {key!r}")
        opt[key] = value
    return opt


# --------------------------------------------------------------------------------------------- YAML files

def load_yaml(path: Path, what: str = "file") -> dict[str, Any]:
    """Parse a YAML mapping; UserError naming the file (and line) when it is missing or malformed."""
    return safe_yaml.load_mapping(path, what)


def save_yaml(path: Path, data: Mapping[str, Any]) -> None:
    """Write `data` as block YAML atomically, keys in insertion order."""
    text = yaml.safe_dump(_plain(dict(data)), sort_keys=False, default_flow_style=None)
    atomic_write_text(Path(path), text)


def _plain(value: Any) -> Any:
    """Paths and tuples to the plain types safe_dump accepts."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def load_hyp(path: Path) -> dict[str, Any]:
    """Read and check a hyperparameter file: every required key present and numeric."""
    hyp = load_yaml(path, "--hyp")
    missing = [key for key in REQUIRED_HYP_KEYS if key not in hyp]
    if missing:
        raise UserError(f"--hyp {path}: missing key(s) {', '.join(missing)}; start from hyp.scratch-high.yaml")
    for key, value in hyp.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise UserError(f"--hyp {path}: {key} must be a number, got {value!r}")
    return {key: float(value) for key, value in hyp.items()}


# ------------------------------------------------------------------------------------------ resolution

def resolve_cfg(value: str | Path) -> Path:
    """A --cfg value to a model YAML: an existing path, or a shipped model by name (says so)."""
    from yolotui import configs

    resolver = getattr(configs, "resolve_model_cfg", None)
    path = Path(str(value)).expanduser()
    if path.is_file():
        _check_readable(path, "--cfg")
        return path
    if resolver is None:
        raise UserError(f"--cfg {value}: no such file")
    try:
        return Path(resolver(str(value)))
    except UserError as exc:
        raise UserError(f"--cfg: {exc}") from None


def resolve_weights(value: str | Path) -> Path:
    """An existing, readable --weights file."""
    path = Path(str(value)).expanduser()
    if not path.is_file():
        raise UserError(f"--weights {value}: no such file; give the path of a .pt checkpoint")
    _check_readable(path, "--weights")
    return path


def resolve_data(value: str | Path) -> Path:
    """An existing, readable data.yaml."""
    path = Path(str(value)).expanduser()
    if not str(value).strip():
        raise UserError("--data is required: give the path of a data.yaml (yolotui demo-data makes one)")
    if not path.is_file():
        raise UserError(f"--data {value}: no such file; give the path of a data.yaml")
    _check_readable(path, "--data")
    return path


def _check_readable(path: Path, flag: str) -> None:
    if not os.access(path, os.R_OK):
        raise UserError(f"{flag} {path}: not readable; fix its permissions")


FLOAT_OPTIONS = ("label_smoothing", "save_period_min")
MAX_IMGSZ = 8192  # a side above this is a typo (or a 1000000 that would exhaust host memory), not a plan


def finite_float(value: Any, flag: str) -> float:
    """`value` as a finite float; UserError naming `flag` for NaN, infinity or something not a number."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UserError(f"{flag} {value!r}: give a number") from None
    if not math.isfinite(number):
        raise UserError(f"{flag} {value}: give a finite number (not nan or inf)")
    return number


def round_imgsz(imgsz: int, grid: int = GRID) -> tuple[int, str | None]:
    """Round up to a multiple of `grid` (at least two grids), as the official trainer does; warning or None."""
    if imgsz < 1:
        raise UserError(f"--imgsz {imgsz}: must be a positive number of pixels such as 640")
    if imgsz > MAX_IMGSZ:
        raise UserError(f"--imgsz {imgsz}: at most {MAX_IMGSZ} pixels; typical sizes are 640 to 1280")
    rounded = max(math.ceil(imgsz / grid) * grid, 2 * grid)
    if rounded != imgsz:
        return rounded, f"--imgsz {imgsz} must be a multiple of {grid}, updated to {rounded}"
    return imgsz, None


# ---------------------------------------------------------------------------------------------- devices

# parse_device, device_string and cuda_device_count live in yolotui.devices (the one device parser).


# -------------------------------------------------------------------------------------------- validation

def parse_freeze(value: Any) -> list[int] | str:
    """--freeze as the official list of ints (one N = first N layers; several = those layers) or 'backbone'."""
    if value in (None, "", []):
        return [0]
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    if isinstance(value, int):
        value = [value]
    items = [str(v).strip() for v in value]
    if items == ["backbone"]:
        return "backbone"
    try:
        numbers = [int(v) for v in items]
    except ValueError:
        raise UserError(f"--freeze {' '.join(items)}: give 'backbone', a layer count N, or layer indices") from None
    if any(n < 0 for n in numbers):
        raise UserError("--freeze: layer numbers cannot be negative")
    return numbers


def validate_options(opt: dict[str, Any], check_device: bool = True,
                     notes: list[str] | None = None) -> tuple[dict[str, Any], list[str]]:
    """Check and normalise training options before launch; returns (options, warnings) or raises UserError.

    Paths are resolved (a shipped config named by the user is a choice, not a problem: it is said in `notes`
    when a list is given, never in the warnings), the image size rounded up to a multiple of 32, the device
    checked against the GPUs present.
    """
    notes = notes if notes is not None else []
    opt = {**copy.deepcopy(TRAIN_DEFAULTS), **opt}
    warnings: list[str] = []
    for key in ("epochs", "batch_size"):
        if int(opt[key]) < 1:
            flag = "--batch-size" if key == "batch_size" else "--epochs"
            raise UserError(f"{flag} {opt[key]}: must be at least 1")
    if int(opt["workers"]) < 0:
        raise UserError(f"--workers {opt['workers']}: cannot be negative")
    if not isinstance(opt.get("compile", False), bool):
        raise UserError(f"--compile {opt['compile']!r}: a flag (true or false), not a value")
    if opt.get("precision", "auto") not in PRECISIONS:
        raise UserError(f"--precision {opt['precision']}: choose one of {', '.join(PRECISIONS)}")
    if opt["optimizer"] not in OPTIMIZERS:
        raise UserError(f"--optimizer {opt['optimizer']}: choose one of {', '.join(OPTIMIZERS)}")
    if sum(bool(opt[k]) for k in ("cos_lr", "flat_cos_lr", "fixed_lr")) > 1:
        raise UserError("--cos-lr, --flat-cos-lr and --fixed-lr exclude each other: give at most one")
    for key in FLOAT_OPTIONS:  # NaN and infinity are refused for every float option
        opt[key] = finite_float(opt[key], "--" + key.replace("_", "-"))
    if not 0.0 <= float(opt["label_smoothing"]) < 1.0:
        raise UserError(f"--label-smoothing {opt['label_smoothing']}: must be in [0, 1)")
    if float(opt["save_period_min"]) <= 0:
        raise UserError(f"--save-period-min {opt['save_period_min']}: must be above 0 minutes")
    if opt["cache"] not in (None, "ram", "disk", "val"):
        raise UserError(f"--cache {opt['cache']}: choose ram or disk")
    opt["freeze"] = parse_freeze(opt["freeze"])
    opt["imgsz"], warning = round_imgsz(int(opt["imgsz"]))
    if warning:
        warnings.append(warning)

    opt["data"] = str(resolve_data(opt["data"]).resolve())
    if opt["weights"]:
        opt["weights"] = str(resolve_weights(opt["weights"]).resolve())
    if opt["cfg"]:
        cfg = resolve_cfg(opt["cfg"])
        if not Path(str(opt["cfg"])).expanduser().is_file():
            notes.append(f"model {opt['cfg']}: the shipped {cfg.name}")
        opt["cfg"] = str(cfg.resolve())
    elif not opt["weights"]:
        raise UserError("give --cfg (a model YAML such as yolov9-s.yaml) or --weights (a checkpoint)")
    from yolotui.configs import resolve_hyp

    hyp_path = resolve_hyp(opt["hyp"])
    if opt["hyp"] and opt["hyp"] != TRAIN_DEFAULTS["hyp"] and not Path(str(opt["hyp"])).expanduser().is_file():
        notes.append(f"hyperparameters {opt['hyp']}: the shipped {hyp_path.name}")
    load_hyp(hyp_path)
    opt["hyp"] = str(hyp_path.resolve())
    if check_device:
        opt["device"] = device_string(parse_device(opt["device"]))
    return opt, warnings


def opt_yaml_dict(opt: Mapping[str, Any], hyp: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """opt.yaml as the official trainer writes it (its keys, plus yolotui's few extras); `hyp` inlined if given."""
    out: dict[str, Any] = {}
    for key in TRAIN_DEFAULTS:
        out[key] = opt.get(key, TRAIN_DEFAULTS[key])
    for key, value in FIXED_OFFICIAL_KEYS.items():
        out.setdefault(key, opt.get(key, value))
    for key in ("resume", "save_dir", "accumulate", "world_size"):
        if key in opt:
            out[key] = opt[key]
    if hyp is not None:
        out["hyp"] = dict(hyp)
    return _plain(out)
