"""Training data loader throughput at 640 px: yolotui against ultralytics' own loader, side by side.

Default mode (`--mode vs-ultralytics`): the same generated data set (`--images` JPEGs at `--imgsz`), the same
batch, the same worker count and the same augmentations on both sides (mosaic, random affine with the same
translate and scale, HSV, left-right flip, mixup, letterbox), each side with its training loader as its trainer
builds it: yolotui's `engine.data.pipeline.epoch_loader` (persistent workers, epoch-tagged sampler) and
ultralytics' `build_yolo_dataset` + `build_dataloader` (its InfiniteDataLoader). One warm-up epoch (workers start,
both sides' decoded-image buffers fill), then `--epochs` timed epochs; images per second delivered to the
training loop (with `--device cuda` each batch is also copied to the GPU, non-blocking from pinned memory, and the
copy waited for). `--rounds N` alternates the sides N times and prints the median ratio. `--cache ram|disk` is
given to both sides. ultralytics is a benchmark-only dependency (never a runtime one); without it this mode says
how to get it.

`--mode augment-cost`: yolotui's loader with full augmentation against augmentation off (letterbox only), the
old figure of the README's benchmark table.

Run it on a quiet machine and quote the median of three rounds, e.g.
    python bench/bench_loader.py --rounds 3 --workers 2
    python bench/bench_loader.py --rounds 3 --workers 2 --cache ram
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from yolotui.datasets import check_labels, list_images, load_data_yaml, make_demo_dataset  # noqa: E402
from yolotui.engine.data import AUGMENT_DEFAULTS, YoloDataset, build_loader, set_loader_epoch  # noqa: E402

# The augmentation both sides run: hyp.scratch-high's values (yolotui's defaults), given to ultralytics too.
SAME_HYP = {k: AUGMENT_DEFAULTS[k] for k in ("hsv_h", "hsv_s", "hsv_v", "degrees", "translate", "scale", "shear",
                                             "perspective", "flipud", "fliplr", "mosaic", "mixup")}


def _worker_pids(loader) -> list[int]:
    if isinstance(loader, _YolotuiLoader):
        from yolotui.engine.data.pipeline import kept_epoch_loader

        inner = kept_epoch_loader(loader.dataset)
    else:
        inner = loader
    iterator = getattr(inner, "_iterator", None) or getattr(inner, "iterator", None)
    return [w.pid for w in getattr(iterator, "_workers", []) if w.pid]


def _cpu_seconds(pids: list[int]) -> float:
    """CPU time (user + system) of this process and of the live processes `pids` (their /proc/PID/stat)."""
    total = time.process_time()
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
        except (OSError, ValueError, IndexError):
            pass
    return total


def _consume(loader, epochs: int, device) -> tuple[float, float]:
    """(images per second, CPU milliseconds per image of this process and the workers) over `epochs` passes of
    an already warm loader (each a fresh `iter`). The CPU figure counts work, not waiting: on a busy machine it
    is the steadier of the two."""
    import torch

    pids = _worker_pids(loader)
    cpu0, main0 = _cpu_seconds(pids), time.process_time()
    count, started = 0, time.perf_counter()
    for epoch in range(epochs):
        if hasattr(loader, "set_epoch_for_bench"):
            loader.set_epoch_for_bench(epoch + 1)
        for batch in loader:
            img = batch["img"]
            if device is not None:
                img = img.to(device, non_blocking=True)
            count += int(img.shape[0])
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)
    rate = count / (time.perf_counter() - started)
    if os.environ.get("BENCH_LOADER_DEBUG"):
        print(f"    main process {(time.process_time() - main0) * 1000 / max(count, 1):.2f} CPU ms per image")
    return rate, (_cpu_seconds(pids) - cpu0) * 1000 / max(count, 1)


class _YolotuiLoader:
    """yolotui's training loader across epochs, exactly as the trainer asks pipeline.epoch_loader for it."""

    def __init__(self, report, imgsz: int, batch: int, workers: int, cache: str | None) -> None:
        self.dataset = YoloDataset(report, imgsz=imgsz, augment=True, hyp=SAME_HYP, seed=0, cache=cache)
        self.opt = {"workers": workers, "seed": 0}
        self.batch = batch
        self.epoch = 0

    def set_epoch_for_bench(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        from yolotui.engine.data.pipeline import epoch_loader

        return iter(epoch_loader(self.dataset, self.opt, self.batch, self.epoch, 0, mosaic=True))

    def close(self) -> None:
        from yolotui.engine.data.pipeline import release_epoch_loader

        release_epoch_loader(self.dataset)


def _ultralytics_loader(data_yaml: Path, imgsz: int, batch: int, workers: int, cache: str | None):
    from ultralytics.cfg import get_cfg
    from ultralytics.data.build import build_dataloader, build_yolo_dataset
    from ultralytics.data.utils import check_det_dataset

    cfg = get_cfg(overrides={"imgsz": imgsz, "cache": cache or False, "copy_paste": 0.0, "cutmix": 0.0,
                             "close_mosaic": 0, **SAME_HYP})
    data = check_det_dataset(str(data_yaml))
    dataset = build_yolo_dataset(cfg, data["train"], batch, data, mode="train")
    return build_dataloader(dataset, batch, workers, shuffle=True, rank=-1)


def vs_ultralytics(args) -> int:
    """Side-by-side mode; see the module docstring."""
    import torch

    folder = Path(tempfile.mkdtemp(prefix="bench-loader-"))
    os.environ.setdefault("YOLO_OFFLINE", "1")
    os.environ.setdefault("YOLO_CONFIG_DIR", str(folder / "ultralytics-config"))
    try:
        import ultralytics  # noqa: F401
    except ImportError:
        print("ultralytics is not importable; see bench/bench_vs_ultralytics.py for a side venv that has it",
              file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    device = torch.device(args.device) if args.device else None
    data_yaml = Path(make_demo_dataset(folder / "data", n_train=args.images, n_val=2, img=args.imgsz, seed=0))
    cfg = load_data_yaml(data_yaml)
    report = check_labels(list_images(cfg.train), cfg.nc, cache=False)
    ours_rates, theirs_rates, ours_cpu, theirs_cpu = [], [], [], []
    for r in range(args.rounds):
        order = ("ultralytics", "yolotui") if r % 2 == 0 else ("yolotui", "ultralytics")
        for side in order:
            if side == "yolotui":
                loader = _YolotuiLoader(report, args.imgsz, args.batch, args.workers, args.cache)
            else:
                loader = _ultralytics_loader(data_yaml, args.imgsz, args.batch, args.workers, args.cache)
            _consume(loader, 1, device)  # warm-up: workers start, decoded-image buffers fill
            rate, cpu = _consume(loader, args.epochs, device)
            (ours_rates if side == "yolotui" else theirs_rates).append(rate)
            (ours_cpu if side == "yolotui" else theirs_cpu).append(cpu)
            print(f"  round {r + 1} {side:12s} {rate:8.1f} images/s, {cpu:6.2f} CPU ms per image", flush=True)
            loader.close()
            del loader
    ratios = [a / b for a, b in zip(ours_rates, theirs_rates)]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\ntraining loader at {args.imgsz} px, batch {args.batch}, {args.workers} workers, cache "
          f"{args.cache or 'none'}, {args.images} images x {args.epochs} timed epochs, "
          f"{'to ' + args.device if args.device else 'on the host'}; load average now {load:.2f} on "
          f"{os.cpu_count()} CPUs (quote only quiet-machine runs):")
    print(f"  yolotui {statistics.median(ours_rates):.1f} images/s, ultralytics {statistics.median(theirs_rates):.1f} "
          f"images/s; ratio median {statistics.median(ratios):.2f}x (rounds: "
          f"{', '.join(f'{x:.2f}' for x in ratios)})")
    cpu_ratios = [b / a for a, b in zip(ours_cpu, theirs_cpu)]
    print(f"  CPU per image (main process + workers): yolotui {statistics.median(ours_cpu):.2f} ms, ultralytics "
          f"{statistics.median(theirs_cpu):.2f} ms; ultralytics/yolotui median {statistics.median(cpu_ratios):.2f}x")
    return 0


def images_per_second(report, augment: bool, imgsz: int, batch: int, workers: int, epochs: int, cache) -> float:
    """Images per second of `epochs` full passes (after one warm-up pass)."""
    dataset = YoloDataset(report, imgsz=imgsz, augment=augment, hyp=AUGMENT_DEFAULTS, seed=0, cache=cache)
    loader = build_loader(dataset, batch, workers=workers, shuffle=True, seed=0, persistent=True)
    set_loader_epoch(loader, 0, mosaic=True)
    for _ in loader:  # warm-up: page cache, worker start
        pass
    count, started = 0, time.perf_counter()
    for epoch in range(1, epochs + 1):
        set_loader_epoch(loader, epoch, mosaic=True)
        for batch_dict in loader:
            count += batch_dict["img"].shape[0]
    return count / (time.perf_counter() - started)


def augment_cost(args) -> int:
    """Full augmentation against augmentation off, yolotui's loader only."""
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
    return 0


def main() -> int:
    """Parse the options and run the chosen mode."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("vs-ultralytics", "augment-cost"), default="vs-ultralytics")
    parser.add_argument("--images", type=int, default=160, help="generated training images")
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs per side and round")
    parser.add_argument("--rounds", type=int, default=1, help="alternate the sides this many times; median ratio")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the main process")
    parser.add_argument("--cache", choices=("ram", "disk"), default=None, help="given to both sides")
    parser.add_argument("--device", default=None, help="also copy each batch there (cuda, cuda:1, ...)")
    args = parser.parse_args()
    return vs_ultralytics(args) if args.mode == "vs-ultralytics" else augment_cost(args)


if __name__ == "__main__":
    sys.exit(main())
