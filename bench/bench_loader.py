"""Loader throughput at 640 px: full official augmentation vs augmentation off, same data, same loader.

Prints images/s for both and their ratio (augmented / plain); the plain letterbox loader measured in
the same run is the baseline. Usage: python bench/bench_loader.py [--images 64] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from yolotui.datasets import check_labels, list_images, load_data_yaml, make_demo_dataset  # noqa: E402
from yolotui.engine.data import AUGMENT_DEFAULTS, YoloDataset, build_loader, set_loader_epoch  # noqa: E402


def images_per_second(report, augment: bool, imgsz: int, batch: int, workers: int, epochs: int, cache) -> float:
    """Images per second of `epochs` full passes (after one warm-up pass)."""
    dataset = YoloDataset(report, imgsz=imgsz, augment=augment, hyp=AUGMENT_DEFAULTS, seed=0, cache=cache)
    loader = build_loader(dataset, batch, workers=workers, shuffle=True, seed=0)
    set_loader_epoch(loader, 0, mosaic=True)
    for _ in loader:  # warm-up: page cache, worker start
        pass
    count, started = 0, time.perf_counter()
    for epoch in range(1, epochs + 1):
        set_loader_epoch(loader, epoch, mosaic=True)
        for batch_dict in loader:
            count += batch_dict["img"].shape[0]
    return count / (time.perf_counter() - started)


def main() -> None:
    """Build a demo data set at the chosen size and time both loaders on it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1))
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--cache", choices=("ram",), default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        yaml_path = make_demo_dataset(tmp, n_train=args.images, n_val=1, img=args.imgsz, seed=0)
        cfg = load_data_yaml(yaml_path)
        report = check_labels(list_images(cfg.train), cfg.nc, cache=False)
        plain = images_per_second(report, False, args.imgsz, args.batch, args.workers, args.epochs, args.cache)
        full = images_per_second(report, True, args.imgsz, args.batch, args.workers, args.epochs, args.cache)
    print(f"loader at {args.imgsz} px, batch {args.batch}, {args.workers} workers, cache={args.cache}, "
          f"{args.images} images x {args.epochs} epochs")
    print(f"augmentation off (letterbox): {plain:8.1f} images/s  (baseline)")
    print(f"full augmentation (mosaic, affine, HSV, flips, mixup): {full:8.1f} images/s")
    print(f"ratio full / off: {full / plain:.2f}")


if __name__ == "__main__":
    main()
