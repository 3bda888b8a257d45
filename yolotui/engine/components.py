"""The trainer's seams to the model, data, loss and validation packages, in one place.

Each function adapts one sibling package's API (see /work/interfaces.md) to what the training loop needs, so
the loop itself reads as the method and a change in a sibling's signature touches one function here.
"""

from __future__ import annotations

import functools
import math
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from yolotui.errors import UserError


@dataclass
class DataInfo:
    """A checked data set: class count and names, and the usable (image, labels) pairs of each split."""

    yaml_path: str
    nc: int
    names: list[str]
    train: list[tuple[str, np.ndarray]]
    val: list[tuple[str, np.ndarray]]
    val_shapes: list[tuple[int, int]] | None = None  # (h, w) of each val image, for rectangular batches


def build_model(cfg: str | Path | dict, nc: int | None) -> nn.Module:
    """A YoloModel from a YAML path, a shipped name or a yaml dict."""
    from yolotui.engine.model import build_model as _build

    return _build(cfg, nc=nc)


def training_memory_format(device: torch.device) -> torch.memory_format:
    """The memory format the trainer keeps the model and its input batches in: channels_last everywhere.

    On CUDA it feeds cuDNN's NHWC kernels (and tensor cores under AMP); on the CPU oneDNN's convolutions run
    natively in NHWC too, which saves a layout reorder around every convolution (about 10 % of a step).
    """
    return torch.channels_last


def prepare_for_training(model: nn.Module, device: torch.device) -> nn.Module:
    """`model` on `device` in the training memory format (the same model object)."""
    return model.to(device).to(memory_format=training_memory_format(torch.device(device)))


def load_weights_source(path: str | Path) -> dict[str, Any]:
    """A --weights file as a dict with model_yaml, nc, names, ema/model state dicts (yolotui or official)."""
    from yolotui.engine.official import load_weights_source as _load

    return _load(path)


def build_loss(model: nn.Module, hyp: dict[str, Any], label_smoothing: float) -> Any:
    """The YOLOv9 loss for `model`'s head."""
    from yolotui.engine.loss import YoloLoss

    return YoloLoss(int(model.nc), model.stride, reg_max=int(getattr(model, "reg_max", 16)), hyp=hyp,
                    label_smoothing=label_smoothing)


def load_data(opt: dict[str, Any]) -> DataInfo:
    """Read data.yaml and check the labels of both splits; UserError when a split has no usable image."""
    from yolotui.datasets import check_labels, list_images, load_data_yaml

    config = load_data_yaml(opt["data"])
    single = bool(opt.get("single_cls"))
    nc = 1 if single else int(config.nc)
    names = ["item"] if single and len(config.names) != 1 else list(config.names)
    splits = {}
    val_shapes = None
    for split in ("train", "val"):
        report = check_labels(list_images(config.split(split)), int(config.nc),
                              min_items=int(opt.get("min_items", 0)) if split == "train" else 0)
        report.require_usable(f"{config.yaml_path} '{split}'")
        pairs = [(path, labels) for path, labels in report.usable]
        if single:
            pairs = [(path, _single_class(labels)) for path, labels in pairs]
        splits[split] = pairs
        if split == "val" and len(report.shapes) == len(pairs):
            val_shapes = list(report.shapes)
    return DataInfo(str(config.yaml_path), nc, names, splits["train"], splits["val"], val_shapes)


def _single_class(labels: np.ndarray) -> np.ndarray:
    labels = np.array(labels, dtype=np.float32, copy=True).reshape(-1, 5)
    labels[:, 0] = 0
    return labels


def build_datasets(data: DataInfo, opt: dict[str, Any], hyp: dict[str, Any], batch_size: int) -> tuple[Any, Any]:
    """(augmenting training dataset, validation loader at twice the batch, in the official rectangular
    batches with half a stride of margin)."""
    from yolotui.engine.data.dataset import YoloDataset
    from yolotui.engine.data.loader import build_loader, default_workers

    cache = opt.get("cache") if opt.get("cache") in ("ram",) else None
    imgsz, seed = int(opt["imgsz"]), int(opt.get("seed", 0))
    train_set = YoloDataset(data.train, imgsz=imgsz, augment=True, hyp=hyp, seed=seed, cache=cache)
    val_set = YoloDataset(data.val, imgsz=imgsz, augment=False, hyp=hyp, seed=seed, cache=cache, rect=True,
                          batch_size=batch_size * 2, pad=0.5, shapes=getattr(data, "val_shapes", None))
    workers = min(default_workers(int(opt.get("workers", 0))), 2)
    val_loader = build_loader(val_set, batch_size=batch_size * 2, workers=workers,
                              shuffle=False, seed=seed)
    return train_set, shield_workers(val_loader)


def batches_per_epoch(train_set: Any, batch_size: int, world_size: int = 1) -> int:
    """Batches each process runs in one epoch (the last one may be short; shards are padded to equal size)."""
    return math.ceil(math.ceil(len(train_set) / world_size) / batch_size)


def epoch_loader(train_set: Any, opt: dict[str, Any], batch_size: int, epoch: int, start_batch: int,
                 mosaic: bool, rank: int = 0, world_size: int = 1) -> Any:
    """The training batches of `epoch` from batch `start_batch` on; order and augmentation depend only on
    (seed, epoch, index)."""
    from yolotui.engine.data.loader import build_loader, default_workers, set_loader_epoch

    workers = default_workers(int(opt.get("workers", 0)), world_size)  # never more than the CPUs per rank
    loader = build_loader(train_set, batch_size=batch_size, workers=workers, shuffle=True,
                          seed=int(opt.get("seed", 0)), start_batch=start_batch, epoch=epoch, rank=rank,
                          world_size=world_size)
    set_loader_epoch(loader, epoch, mosaic)
    return shield_workers(loader)


def shield_workers(loader: Any) -> Any:
    """Make the loader's worker processes ignore SIGTERM/SIGINT/SIGUSR1.

    `yolotui stop` signals the trainer's whole process group; the trainer itself checkpoints and exits at the
    next step, but a worker dying of the same signal would make the DataLoader raise mid-epoch first.
    """
    original = loader.worker_init_fn
    loader.worker_init_fn = functools.partial(_shielded_init, original)
    return loader


def _shielded_init(original: Any, worker_id: int) -> None:
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    if original is not None:
        original(worker_id)


def run_validation(model: nn.Module, loader: Any, device: torch.device, nc: int, names: list[str],
                   loss_fn: Any) -> dict[str, Any]:
    """Validate `model`: {P, R, mAP50, mAP50-95, losses [box, cls, dfl], per_class}."""
    from yolotui.engine.validate import validate

    result = validate(model, loader, device, nc, names, loss_fn=loss_fn)
    losses = getattr(result, "losses", None)
    if losses is None:
        losses = [getattr(result, f"{k}_loss", 0.0) for k in ("box", "cls", "dfl")]
    losses = [float(v) for v in (losses.tolist() if isinstance(losses, torch.Tensor) else losses)]
    if len(losses) != 3:
        raise UserError(f"validation returned {len(losses)} loss values; expected box, cls, dfl")
    return {
        "P": float(result.precision),
        "R": float(result.recall),
        "mAP50": float(result.map50),
        "mAP50-95": float(result.map),
        "losses": losses,
        "per_class": getattr(result, "per_class", None),
    }
