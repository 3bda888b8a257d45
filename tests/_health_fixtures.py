"""Checkpoint fixtures for the health tests, built with torch (tests may import torch; the library may not)."""

from __future__ import annotations

import hashlib
import json
import sys
import types
from collections import OrderedDict
from pathlib import Path

import torch

torch.set_num_threads(1)

OPT = {"epochs": 10, "batch_size": 8, "imgsz": 64, "data": "data.yaml", "seed": 0, "resume": False}
HYP = {"lr0": 0.01, "lrf": 0.01, "momentum": 0.937, "mosaic": 1.0}


def tiny_state_dict(width: int = 8, layers: int = 4, dtype=torch.float32) -> OrderedDict:
    """A small model-like state dict."""
    generator = torch.Generator().manual_seed(0)
    sd = OrderedDict()
    for i in range(layers):
        sd[f"model.{i}.conv.weight"] = torch.randn(width, width, 3, 3, generator=generator).to(dtype)
        sd[f"model.{i}.bn.running_mean"] = torch.zeros(width, dtype=dtype)
    return sd


def write_manifest(path: Path, ckpt: dict) -> None:
    """The manifest the trainer writes beside a checkpoint."""
    data = Path(path).read_bytes()
    manifest = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "epoch": ckpt.get("epoch"),
                "step": ckpt.get("step"), "epochs": ckpt.get("epochs"), "keys": sorted(ckpt)}
    Path(str(path) + ".json").write_text(json.dumps(manifest))


def yolotui_checkpoint(epoch: int = 3, epochs: int = 10, step: int = 0, optimizer: bool = True,
                       width: int = 8, layers: int = 4, opt: dict | None = None, hyp: dict | None = None) -> dict:
    """A checkpoint dict in yolotui's layout (per interfaces.md)."""
    model = tiny_state_dict(width, layers)
    params = [torch.nn.Parameter(t.clone()) for t in model.values() if t.dim() > 1]
    sgd = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    for p in params:
        p.grad = torch.ones_like(p)
    sgd.step()
    ckpt = {"format": "yolotui-1", "model_yaml": {"nc": 3, "backbone": [], "head": []}, "nc": 3,
            "names": ["a", "b", "c"], "epoch": epoch, "step": step, "epochs": epochs, "model": model,
            "ema": tiny_state_dict(width, layers), "updates": epoch * 10,
            "scheduler": {"last_epoch": epoch, "base_lrs": [0.01]}, "scaler": None,
            "rng": {"torch": torch.get_rng_state()}, "best_fitness": 0.125,
            "opt": dict(opt or OPT, epochs=epochs), "hyp": dict(hyp or HYP),
            "versions": {"torch": str(torch.__version__), "python": sys.version.split()[0]}, "date": "2026-12-02T10:00:00"}
    if optimizer:
        ckpt["optimizer"] = sgd.state_dict()
    return ckpt


def save_yolotui(path: Path, manifest: bool = True, **kwargs) -> dict:
    """Write a yolotui checkpoint (and its manifest) to `path`; return the dict."""
    ckpt = yolotui_checkpoint(**kwargs)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    torch.save(ckpt, path)
    if manifest:
        write_manifest(path, ckpt)
    return ckpt


def _official_model_class():
    """A `models.yolo.DetectionModel` class, registered only while saving, so pickle writes that global."""
    models = types.ModuleType("models")
    yolo = types.ModuleType("models.yolo")

    class DetectionModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3)

    DetectionModel.__module__ = "models.yolo"
    DetectionModel.__qualname__ = "DetectionModel"
    yolo.DetectionModel = DetectionModel
    models.yolo = yolo
    return models, yolo, DetectionModel


def save_official(path: Path, finished: bool = True, epoch: int = 2, epochs: int = 5) -> None:
    """Write a checkpoint in the official YOLOv9 layout (pickled model classes), finished or mid-run."""
    models, yolo, cls = _official_model_class()
    saved = {name: sys.modules.get(name) for name in ("models", "models.yolo")}
    sys.modules["models"], sys.modules["models.yolo"] = models, yolo
    try:
        model = cls().half()
        opt = {"weights": "", "cfg": "models/detect/yolov9-s.yaml", "data": "data/coco.yaml", "epochs": epochs,
               "batch_size": 16, "hyp": dict(HYP)}
        ckpt = {"epoch": -1 if finished else epoch, "best_fitness": None if finished else 0.25, "model": model,
                "ema": None if finished else cls().half(), "updates": None if finished else 100,
                "optimizer": None if finished else torch.optim.SGD(model.parameters(), lr=0.01).state_dict(),
                "opt": opt, "git": {"remote": None, "branch": None, "commit": None}, "date": "2026-12-01T10:00:00"}
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        torch.save(ckpt, path)
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


class FileCreatingPayload:
    """Unpickling this opens (creates) `marker` for writing: proof that a load ran code."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def save_malicious(path: Path, marker: Path, zipped: bool) -> None:
    """A pickle whose payload creates `marker` when unpickled: bare, or inside torch's zip as a 'checkpoint'."""
    import pickle

    if zipped:
        torch.save({"epoch": 1, "epochs": 3, "model": FileCreatingPayload(str(marker))}, path)
    else:
        Path(path).write_bytes(pickle.dumps(FileCreatingPayload(str(marker)), protocol=2))
