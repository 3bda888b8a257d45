"""The checks behind the wizards' inline errors: each returns facts or raises UserError with a one-line reason.

Torch-free (datasets, configs, health, runs only), quick enough to call on every edit or from a worker
thread. The CLI checks again when it runs; these exist so that a wizard never launches a command that is
known to fail, and says which field to fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from yolotui import safe_yaml
from yolotui.errors import UserError

CPU = "cpu"


# ------------------------------------------------------------------------------------------ numbers

def parse_int(text: str, what: str, minimum: int = 1) -> int:
    """A whole number of at least `minimum` from a field's text."""
    text = str(text).strip()
    try:
        value = int(text)
    except ValueError:
        raise UserError(f"{what}: '{text}' is not a whole number") from None
    if value < minimum:
        raise UserError(f"{what}: must be at least {minimum}")
    return value


def parse_positive_float(text: str, what: str) -> float:
    """A number above 0 from a field's text."""
    text = str(text).strip()
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"{what}: '{text}' is not a number") from None
    if not value > 0:
        raise UserError(f"{what}: must be above 0")
    return value


# ------------------------------------------------------------------------------------------ data.yaml

@dataclass
class DataFacts:
    """A data.yaml that loads: classes and image counts per split."""

    path: str
    nc: int
    names: list[str]
    images: dict[str, int] = field(default_factory=dict)

    def summary(self, width: int = 64) -> str:
        """'3 classes (circle, square, triangle) · train 128 · val 32 images', cut to `width`."""
        counts = " · ".join(f"{split} {count}" for split, count in self.images.items())
        names = ", ".join(self.names)
        text = f"{self.nc} class{'es' if self.nc != 1 else ''} ({names}) · {counts} images"
        if len(text) > width:
            keep = max(8, width - len(text) + len(names) - 1)
            text = f"{self.nc} classes ({names[:keep]}…) · {counts} images"
        return text


def check_data(value: str) -> DataFacts:
    """Load a data.yaml (yolotui.datasets) and count its images; UserError when it is missing, unparsable or empty."""
    from yolotui.datasets import list_images, load_data_yaml

    text = str(value).strip()
    if not text:
        raise UserError("give the path of a data.yaml (yolotui demo-data makes one)")
    path = Path(text).expanduser()
    if path.is_dir():
        raise UserError(f"{text}: is a folder; give the data.yaml inside it")
    if not path.is_file():
        raise UserError(f"{text}: no such file")
    config = load_data_yaml(path)
    images = {"train": len(list_images(config.train)), "val": len(list_images(config.val))}
    if config.test:
        images["test"] = len(list_images(config.test))
    for split in ("train", "val"):
        if images[split] == 0:
            raise UserError(f"{text}: no images found for '{split}' ({', '.join(config.split(split))})")
    return DataFacts(str(path), config.nc, list(config.names), images)


# ------------------------------------------------------------------------------------------ models

@dataclass
class ModelChoice:
    """A shipped model config with its size at nc=80, 640x640."""

    name: str
    params: int | None
    gflops: float | None

    @property
    def label(self) -> str:
        """'yolov9-s    9.8 M params   39.9 GFLOPs'."""
        params = f"{self.params / 1e6:5.1f} M params" if self.params else "  ? params"
        gflops = f"{self.gflops:6.1f} GFLOPs" if self.gflops else "  ? GFLOPs"
        return f"{self.name:<9} {params} {gflops}"


def model_choices() -> list[ModelChoice]:
    """The shipped configs, smallest first within each family (gelan, yolov9)."""
    from yolotui.configs import model_summaries, shipped_model_configs

    summaries = model_summaries()
    order = "tsmce"
    choices = [ModelChoice(name, summaries.get(name, {}).get("params"), summaries.get(name, {}).get("gflops"))
               for name in shipped_model_configs()]
    return sorted(choices, key=lambda c: (c.name.split("-")[0] != "yolov9", c.name.split("-")[0],
                                          order.find(c.name[-1]) if c.name[-1] in order else 9, c.name))


def model_layers(cfg: dict[str, Any]) -> tuple[int, int]:
    """(layers, backbone layers) of a model YAML dict."""
    backbone = cfg.get("backbone") or []
    head = cfg.get("head") or []
    return len(backbone) + len(head), len(backbone)


def check_model_path(value: str) -> Path:
    """A model YAML path that exists and holds backbone and head lists."""
    text = str(value).strip()
    if not text:
        raise UserError("give the path of a model YAML, or pick a shipped config")
    path = Path(text).expanduser()
    if not path.is_file():
        raise UserError(f"{text}: no such file")
    try:
        cfg = safe_yaml.load_file(path, text)
    except UserError:
        raise
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise UserError(f"{text}: not readable YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(cfg, dict) or not isinstance(cfg.get("backbone"), list) or not isinstance(cfg.get("head"), list):
        raise UserError(f"{text}: not a model YAML (needs 'backbone' and 'head' lists)")
    return path


# ------------------------------------------------------------------------------------------ devices

@dataclass
class DeviceChoice:
    """A device the trainer can use: 'cpu' or a GPU index, with what telemetry says about it."""

    value: str
    label: str


def device_choices(snapshot: Any) -> list[DeviceChoice]:
    """The GPUs of a telemetry snapshot (free memory first in the label), then the CPU."""
    choices: list[DeviceChoice] = []
    for gpu in (getattr(snapshot, "gpus", None) or []):
        if getattr(gpu, "error", None):
            continue
        total, used = gpu.memory_total_mb, gpu.memory_used_mb
        free = f"{(total - used) / 1024:.1f} GiB free of {total / 1024:.0f}" if total and used is not None else "memory ?"
        choices.append(DeviceChoice(str(gpu.index), f"GPU {gpu.index}: {gpu.name or 'GPU'}, {free}"))
    choices.append(DeviceChoice(CPU, "CPU"))
    return choices


def check_device(value: str, gpu_indices: list[int]) -> str:
    """'cpu', or GPU indices that telemetry saw ('0', '0,1', 'cuda:1'), as the canonical --device value."""
    from yolotui.devices import check_visible

    return check_visible(value, gpu_indices)


# ------------------------------------------------------------------------------------------ names

def check_new_name(project: str | Path, name: str) -> Path:
    """The folder a new run `name` would get under `project`; UserError when it is not a plain name or exists."""
    from yolotui.runs.store import validate_name

    name = str(name).strip()
    validate_name(name)
    run_dir = Path(project).expanduser() / name
    if run_dir.exists():
        raise UserError(f"{run_dir} exists already: choose another name")
    return run_dir


def free_name(project: str | Path, name: str) -> str:
    """`name`, or the first free `name2`, `name3` ... under `project` (a default that never collides)."""
    from yolotui.runs.store import next_free_path

    return next_free_path(Path(project).expanduser(), name).name


# ------------------------------------------------------------------------------------------ fine-tune sources

@dataclass
class SourceFacts:
    """What a fine-tune starts from: the checkpoint, its run, classes, and the model's layer counts."""

    checkpoint: str
    run_dir: str | None
    nc: int | None
    layers: int | None
    backbone_layers: int | None
    epoch: int | None = None
    verdict: str | None = None

    @property
    def head_index(self) -> int | None:
        """Index of the detection head (the model's last layer)."""
        return self.layers - 1 if self.layers else None


def _cfg_dict(value: Any, run_dir: Path | None) -> dict[str, Any] | None:
    if isinstance(value, dict):
        return value
    if not value:
        return None
    from yolotui.configs import resolve_model_cfg

    try:
        path = resolve_model_cfg(str(value))
    except UserError:
        if run_dir is None:
            return None
        try:
            path = resolve_model_cfg(str(run_dir / str(value)))
        except UserError:
            return None
    try:
        loaded = safe_yaml.load_file(Path(path))
    except (OSError, UnicodeDecodeError, UserError, yaml.YAMLError):
        return None
    return loaded if isinstance(loaded, dict) else None


def source_facts(value: str) -> SourceFacts:
    """Resolve a fine-tune source (run folder or name: its best.pt else last.pt; or a checkpoint) and read it."""
    from yolotui.health.verdict import CORRUPT, FOREIGN, MISSING, diagnose_checkpoint

    text = str(value).strip()
    if not text:
        raise UserError("give a run (name or folder) or a checkpoint file to fine-tune from")
    from yolotui.runs.resolve import resolve_source

    source = resolve_source(text)
    ckpt, run_dir = source.checkpoint, source.run_dir
    verdict = diagnose_checkpoint(ckpt)
    if verdict.verdict in (CORRUPT, FOREIGN, MISSING):
        reason = verdict.reasons[0] if verdict.reasons else verdict.verdict
        raise UserError(f"{ckpt.name} is {verdict.verdict}: {reason}")
    info = getattr(verdict, "info", None)
    nc = getattr(info, "nc", None)
    opt = dict(getattr(info, "opt", None) or {})
    if run_dir is not None:
        from yolotui.config import load_yaml

        try:
            opt = {**load_yaml(run_dir / "opt.yaml", "opt.yaml"), **opt}
        except UserError:
            pass
    cfg = _cfg_dict(opt.get("cfg"), run_dir)
    layers, backbone = model_layers(cfg) if cfg else (None, None)
    if nc is None and opt.get("data"):
        try:
            nc = check_data(str(opt["data"])).nc
        except UserError:
            nc = None
    return SourceFacts(str(ckpt), str(run_dir) if run_dir else None, nc, layers, backbone,
                       verdict.epoch, verdict.verdict)


def check_freeze(mode: str, layers_text: str, source: SourceFacts | None, new_nc: int | None) -> str:
    """The --freeze value for a mode ('backbone', 'layers', 'none'); UserError when it would freeze a head
    whose class outputs are re-initialised (the new data's class count differs from the source's)."""
    if mode == "backbone":
        return "backbone"
    if mode == "none":
        return "0"
    count = parse_int(layers_text, "layers to freeze", minimum=1)
    if source is not None and source.layers and count > source.layers:
        raise UserError(f"{count} layers: the source model has only {source.layers}")
    head = source.head_index if source is not None else None
    if head is not None and count > head and new_nc is not None and source.nc is not None and new_nc != source.nc:
        raise UserError(f"freezing {count} layers freezes the detection head (layer {head}), whose class outputs are "
                        f"re-initialised for {new_nc} classes (source has {source.nc}): freeze at most {head} layers "
                        "or the backbone")
    return str(count)
