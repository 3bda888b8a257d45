"""Shipped configuration files (model YAMLs, hyperparameters) as torch-free package data.

Model configs live in `models/` (yolov9-t/s/m/c/e and gelan-t/s/m/c/e); `models/summary.json` holds their
layers, parameters and GFLOPs at nc=80, 640x640, so the TUI can show them without importing torch. hyp.py
resolves a --hyp value (a path or a shipped file's name); recipe.py picks the hyperparameter recipe of a new
run without --hyp; modules.py names the engine's building blocks for torch-free checks of a model YAML.
"""

from __future__ import annotations

import json
from pathlib import Path

from yolotui.errors import UserError

CONFIG_DIR = Path(__file__).resolve().parent
MODELS_DIR = CONFIG_DIR / "models"


def shipped_model_configs() -> list[str]:
    """Short names of the shipped model configs, e.g. ['gelan-c', ..., 'yolov9-t']."""
    return sorted(p.stem for p in MODELS_DIR.glob("*.yaml"))


def resolve_model_cfg(value: str | Path) -> Path:
    """The model YAML that `value` names: an existing file, or a shipped config by short name
    ('yolov9-s'), file name ('yolov9-s.yaml') or official repo path ('models/detect/yolov9-s.yaml').

    An existing path wins over a shipped name. Raises UserError naming the shipped choices otherwise.
    """
    text = str(value).strip()
    if not text:
        raise UserError("no model config given; use a name such as yolov9-s or a path to a model YAML")
    path = Path(text).expanduser()
    if path.is_file():
        return path.resolve()
    if path.is_dir():
        raise UserError(f"{text}: is a folder, not a model YAML")
    stem = Path(text).name
    for suffix in (".yaml", ".yml"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
    shipped = MODELS_DIR / f"{stem}.yaml"
    if shipped.is_file():
        return shipped
    choices = ", ".join(shipped_model_configs())
    raise UserError(f"{text}: no such model config file, and not a shipped config name (choose from {choices})")


def model_summaries() -> dict[str, dict]:
    """Per shipped config: layers, params, params_fused, gflops, gflops_fused (nc=80, 640x640)."""
    try:
        return json.loads((MODELS_DIR / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


from yolotui.configs.hyp import resolve_hyp  # noqa: E402,F401  (trainer stream)
