"""The trainer's data: a checked data.yaml's splits, the datasets, and each epoch's loader.

Order and augmentation depend only on (seed, epoch, sample index), so a resumed epoch continues exactly; the
loader's worker processes ignore the stop/save signals the trainer handles itself.
"""

from __future__ import annotations

import atexit
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
    return train_set, keep_workers(shield_workers(val_loader))


def batches_per_epoch(train_set: Any, batch_size: int, world_size: int = 1) -> int:
    """Batches each process runs in one epoch (the last one may be short; shards are padded to equal size)."""
    return math.ceil(math.ceil(len(train_set) / world_size) / batch_size)


def epoch_loader(train_set: Any, opt: dict[str, Any], batch_size: int, epoch: int, start_batch: int,
                 mosaic: bool, rank: int = 0, world_size: int = 1) -> Any:
    """The training batches of `epoch` from batch `start_batch` on; order and augmentation depend only on
    (seed, epoch, index).

    With worker processes, one loader serves every epoch of a data set (kept here until the process ends or
    `release_epoch_loader`), so its workers start once and keep their recently decoded images; the sampler tells
    them each sample's epoch."""
    from yolotui.engine.data.loader import build_loader, default_workers, set_loader_epoch

    workers = default_workers(int(opt.get("workers", 0)), world_size)  # never more than the CPUs per rank
    key = (batch_size, workers, int(opt.get("seed", 0)), rank, world_size)
    kept = _EPOCH_LOADERS.get(id(train_set))
    if kept is not None and kept[0] is train_set and kept[1] == key:
        loader = kept[2]
        if start_batch:
            loader.sampler.skip(start_batch * batch_size)
    else:
        if kept is not None:  # another batch size or worker count: the old workers are of no more use
            release_epoch_loader(kept[0])
        loader = shield_workers(build_loader(
            train_set, batch_size=batch_size, workers=workers, shuffle=True, seed=int(opt.get("seed", 0)),
            start_batch=start_batch, epoch=epoch, rank=rank, world_size=world_size, persistent=True))
        if workers:
            _EPOCH_LOADERS[id(train_set)] = (train_set, key, keep_workers(loader))
    set_loader_epoch(loader, epoch, mosaic)
    return loader


def kept_epoch_loader(train_set: Any) -> Any:
    """The training loader kept for `train_set` (with persistent workers), or None."""
    kept = _EPOCH_LOADERS.get(id(train_set))
    return kept[2] if kept is not None and kept[0] is train_set else None


def release_epoch_loader(train_set: Any) -> None:
    """Stop the worker processes of `train_set`'s kept training loader and forget it (a no-op without one)."""
    kept = _EPOCH_LOADERS.pop(id(train_set), None)
    if kept is not None:
        _stop_workers(kept[2])
        _PERSISTENT.discard(kept[2])


# Loaders with persistent workers, held (strongly) until the process ends: one becoming garbage in a reference
# cycle would have its queues finalised before it could tell its workers to stop, leaving them behind.
_EPOCH_LOADERS: dict[int, tuple[Any, tuple, Any]] = {}
_PERSISTENT: set = set()


def keep_workers(loader: Any) -> Any:
    """Register a loader with persistent workers to be shut down cleanly when the process exits.

    Its workers ignore SIGTERM (shield_workers), so multiprocessing's own exit handler, which terminates daemon
    children with SIGTERM and then joins them, would wait for them forever; this handler, registered later and so
    run first, hands each worker its end-of-work marker instead."""
    if getattr(loader, "num_workers", 0):
        if not _PERSISTENT:
            atexit.register(shutdown_workers)
        _PERSISTENT.add(loader)
    return loader


def shutdown_workers() -> None:
    """Stop the worker processes of every loader registered with keep_workers (idempotent)."""
    for loader in list(_PERSISTENT):
        _stop_workers(loader)


def _stop_workers(loader: Any) -> None:
    iterator = getattr(loader, "_iterator", None)
    stop = getattr(iterator, "_shutdown_workers", None)
    if callable(stop):
        try:
            stop()
        except Exception:  # noqa: BLE001 - best effort; the workers also exit when their parent is gone
            pass


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
