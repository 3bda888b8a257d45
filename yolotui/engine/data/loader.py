"""build_loader: DataLoader over a YoloDataset with the deterministic sampler and the dict collate."""

from __future__ import annotations

import os
from typing import Any

import torch
from torch.utils.data import DataLoader

from yolotui.engine.data.dataset import YoloDataset
from yolotui.engine.data.sampler import DeterministicSampler


def collate_batch(samples: list[tuple]) -> dict[str, Any]:
    """Stack samples into the batch dict the loss and validation read.

    img uint8 [B, 3, H, W]; targets float [N, 6] (batch_idx, cls, cx, cy, w, h normalised); paths;
    ori_shapes [(h0, w0)]; ratio_pad [((ratio_h, ratio_w), (pad_w, pad_h)) or None for mosaics]; indices.
    """
    imgs, labels, paths, shapes, ratio_pads, indices = zip(*samples)
    targets = [torch.cat((torch.full((len(lb), 1), float(i)), lb), 1) for i, lb in enumerate(labels)]
    return {
        "img": torch.stack(imgs, 0),
        "targets": torch.cat(targets, 0) if targets else torch.zeros((0, 6)),
        "paths": list(paths),
        "ori_shapes": list(shapes),
        "ratio_pad": list(ratio_pads),
        "indices": list(indices),
    }


def _init_worker(_worker_id: int) -> None:
    import cv2

    cv2.setNumThreads(0)  # workers are the parallelism; OpenCV threads inside them only oversubscribe


def build_loader(dataset: YoloDataset, batch_size: int, workers: int = 8, shuffle: bool = True, seed: int = 0,
                 rank: int = 0, world_size: int = 1, start_batch: int = 0, epoch: int = 0,
                 drop_last: bool = False) -> DataLoader:
    """A DataLoader whose batches are a pure function of (seed, epoch, rank, world size).

    `start_batch` skips that many batches of the first iteration (resume mid-epoch); call
    `set_loader_epoch(loader, epoch, mosaic)` before every epoch. Workers are started per epoch so they
    see the epoch set on the dataset. Memory is pinned when CUDA is available.
    """
    sampler = DeterministicSampler(len(dataset), seed=seed, shuffle=shuffle, rank=rank, world_size=world_size,
                                   drop_last=drop_last)
    sampler.set_epoch(epoch)
    if start_batch:
        sampler.skip(start_batch * batch_size)
    workers = max(0, min(int(workers), batch_size))  # the caller caps by CPU count (default_workers)
    kwargs: dict[str, Any] = {}
    if workers:
        kwargs = {"worker_init_fn": _init_worker, "prefetch_factor": 2}
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=workers,
                      pin_memory=torch.cuda.is_available(), collate_fn=collate_batch, drop_last=drop_last,
                      persistent_workers=False, **kwargs)


def default_workers(requested: int = 8, world_size: int = 1) -> int:
    """The official rule for --workers: no more than the CPUs each rank gets."""
    return max(0, min(int(requested), (os.cpu_count() or 1) // max(world_size, 1)))


def set_loader_epoch(loader: DataLoader, epoch: int, mosaic: bool = True) -> None:
    """Point a loader from build_loader at `epoch` (order and augmentation) with mosaic on or off."""
    loader.sampler.set_epoch(epoch)
    loader.dataset.set_epoch(epoch, mosaic)


def mosaic_for_epoch(epoch: int, epochs: int, close_mosaic: int) -> bool:
    """Whether mosaic is on in `epoch` (0-based): off for the last `close_mosaic` epochs, also after resume."""
    return not (close_mosaic > 0 and epoch >= epochs - close_mosaic)
