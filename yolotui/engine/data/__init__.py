"""YOLO-format data sets: data.yaml, label checks, deterministic augmentation, loaders, demo data.

The torch-free parts (data.yaml, image listing, label checks, demo data) live in yolotui.datasets; this
package adds augment.py (the official augmentations on an explicit numpy Generator), dataset.py (YoloDataset),
sampler.py (the deterministic sample order), loader.py (the DataLoader and collate), diskcache.py (`--cache
disk`) and pipeline.py (the trainer's splits, datasets and per-epoch loader).
"""

from yolotui.engine.data.augment import AUGMENT_DEFAULTS, letterbox
from yolotui.engine.data.dataset import YoloDataset, sample_rng
from yolotui.engine.data.loader import (
           build_loader,
           collate_batch,
           default_workers,
           mosaic_for_epoch,
           set_loader_epoch,
)
from yolotui.engine.data.sampler import DeterministicSampler

__all__ = ["AUGMENT_DEFAULTS", "DeterministicSampler", "YoloDataset", "build_loader", "collate_batch",
           "default_workers", "letterbox", "mosaic_for_epoch", "sample_rng", "set_loader_epoch"]
