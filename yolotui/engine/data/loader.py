"""build_loader: DataLoader over a YoloDataset with the deterministic sampler and the dict collate."""

from __future__ import annotations

import os
from typing import Any

import torch
from torch.utils.data import DataLoader, get_worker_info

from yolotui.engine.data.dataset import YoloDataset
from yolotui.engine.data.sampler import DeterministicSampler


def collate_batch(samples: list[tuple]) -> dict[str, Any]:
    """Stack samples into the batch dict the loss and validation read.

    img uint8 [B, 3, H, W]; targets float [N, 6] (batch_idx, cls, cx, cy, w, h normalised); paths;
    ori_shapes [(h0, w0)]; ratio_pad [((ratio_h, ratio_w), (pad_w, pad_h)) or None for mosaics]; indices.
    The images are laid out channels_last (the training memory format: nothing to reorder on the device) and,
    in a worker process, written straight into shared memory (no extra copy to hand the batch over).
    """
    imgs, labels, paths, shapes, ratio_pads, indices = zip(*samples)
    counts = torch.tensor([len(lb) for lb in labels])
    image_index = torch.repeat_interleave(torch.arange(len(labels), dtype=torch.float32), counts).unsqueeze(1)
    return {
        "img": stack_channels_last(imgs),
        "targets": torch.cat((image_index, torch.cat(labels, 0).reshape(-1, 5)), 1),
        "paths": list(paths),
        "ori_shapes": list(shapes),
        "ratio_pad": list(ratio_pads),
        "indices": list(indices),
    }


def stack_channels_last(imgs: tuple[torch.Tensor, ...] | list[torch.Tensor]) -> torch.Tensor:
    """`[B, C, H, W]` of same-sized `[C, H, W]` images, in channels_last memory, one copy per image (into shared
    memory inside a DataLoader worker); images of different sizes are stacked plainly."""
    first = imgs[0]
    if first.dim() != 3 or any(im.shape != first.shape or im.dtype != first.dtype for im in imgs):
        return torch.stack(imgs, 0)
    c, h, w = first.shape
    shape = (len(imgs), h, w, c)
    out = None
    if get_worker_info() is not None:
        try:
            numel = len(imgs) * c * h * w
            out = first.new(first._typed_storage()._new_shared(numel, device=first.device)).view(shape)
        except (AttributeError, RuntimeError):
            out = None
    if out is None:
        out = torch.empty(shape, dtype=first.dtype)
    torch.stack([im.permute(1, 2, 0) for im in imgs], 0, out=out)  # each sample's HWC memory, copied once
    return out.permute(0, 3, 1, 2)


def _init_worker(_worker_id: int) -> None:
    import cv2

    cv2.setNumThreads(0)  # workers are the parallelism; OpenCV threads inside them only oversubscribe


def build_loader(dataset: YoloDataset, batch_size: int, workers: int = 8, shuffle: bool = True, seed: int = 0,
                 rank: int = 0, world_size: int = 1, start_batch: int = 0, epoch: int = 0,
                 drop_last: bool = False, persistent: bool = False) -> DataLoader:
    """A DataLoader whose batches are a pure function of (seed, epoch, rank, world size).

    `start_batch` skips that many batches of the first iteration (resume mid-epoch); call
    `set_loader_epoch(loader, epoch, mosaic)` before every epoch: the sampler then hands each index to the
    workers tagged with that epoch and mosaic flag, so `persistent` workers (kept alive from one epoch to the
    next) need not see the dataset's own epoch. Memory is pinned when CUDA is available.
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
                      persistent_workers=bool(persistent and workers), **kwargs)


def default_workers(requested: int = 8, world_size: int = 1) -> int:
    """The official rule for --workers: no more than the CPUs each rank gets."""
    return max(0, min(int(requested), (os.cpu_count() or 1) // max(world_size, 1)))


def set_loader_epoch(loader: DataLoader, epoch: int, mosaic: bool = True) -> None:
    """Point a loader from build_loader at `epoch` (order and augmentation) with mosaic on or off."""
    loader.sampler.set_epoch(epoch)
    loader.sampler.tag = (int(epoch), bool(mosaic))
    loader.dataset.set_epoch(epoch, mosaic)


def mosaic_for_epoch(epoch: int, epochs: int, close_mosaic: int) -> bool:
    """Whether mosaic is on in `epoch` (0-based): off for the last `close_mosaic` epochs, also after resume."""
    return not (close_mosaic > 0 and epoch >= epochs - close_mosaic)
