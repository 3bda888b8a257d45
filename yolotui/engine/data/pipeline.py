"""The trainer's data: a checked data.yaml's splits, the datasets, and each epoch's loader.

Order and augmentation depend only on (seed, epoch, sample index), so a resumed epoch continues exactly; the
loader's worker processes ignore the stop/save signals the trainer handles itself.
"""

from __future__ import annotations

import functools
import math
import signal
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class DataInfo:
    """A checked data set: class count and names, and the usable (image, labels) pairs of each split."""

    yaml_path: str
    nc: int
    names: list[str]
    train: list[tuple[str, np.ndarray]]
    val: list[tuple[str, np.ndarray]]
    val_shapes: list[tuple[int, int]] | None = None  # (h, w) of each val image, for rectangular batches


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

    cache = opt.get("cache") if opt.get("cache") in ("ram", "disk") else None
    imgsz, seed = int(opt["imgsz"]), int(opt.get("seed", 0))
    train_set = YoloDataset(data.train, imgsz=imgsz, augment=True, hyp=hyp, seed=seed, cache=cache)
    val_set = YoloDataset(data.val, imgsz=imgsz, augment=False, hyp=hyp, seed=seed, cache=cache, rect=True,
                          batch_size=batch_size * 2, pad=0.5, shapes=data.val_shapes)
    workers = min(default_workers(int(opt.get("workers", 0))), 2)
    val_loader = build_loader(val_set, batch_size=batch_size * 2, workers=workers, shuffle=False, seed=seed,
                              persistent=True)
    return train_set, shield_workers(val_loader)


def batches_per_epoch(train_set: Any, batch_size: int, world_size: int = 1) -> int:
    """Batches each process runs in one epoch (the last one may be short; shards are padded to equal size)."""
    return math.ceil(math.ceil(len(train_set) / world_size) / batch_size)


def epoch_loader(train_set: Any, opt: dict[str, Any], batch_size: int, epoch: int, start_batch: int,
                 mosaic: bool, rank: int = 0, world_size: int = 1) -> Any:
    """The training batches of `epoch` from batch `start_batch` on; order and augmentation depend only on
    (seed, epoch, index).

    One loader serves every epoch of a data set (kept on it), so its worker processes start once and keep their
    recently decoded images; the sampler tells them each sample's epoch."""
    from yolotui.engine.data.loader import build_loader, default_workers, set_loader_epoch

    workers = default_workers(int(opt.get("workers", 0)), world_size)  # never more than the CPUs per rank
    key = (batch_size, workers, int(opt.get("seed", 0)), rank, world_size)
    kept = getattr(train_set, "epoch_loader_cache", None)
    if kept is not None and kept[0] == key:
        loader = kept[1]
        if start_batch:
            loader.sampler.skip(start_batch * batch_size)
    else:
        loader = shield_workers(build_loader(train_set, batch_size=batch_size, workers=workers, shuffle=True,
                                             seed=int(opt.get("seed", 0)), start_batch=start_batch, epoch=epoch,
                                             rank=rank, world_size=world_size, persistent=True))
        if hasattr(train_set, "epoch_loader_cache"):
            train_set.epoch_loader_cache = (key, loader)
    set_loader_epoch(loader, epoch, mosaic)
    return loader


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
