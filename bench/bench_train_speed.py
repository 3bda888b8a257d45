"""Training speed on the CPU: images per second of the real yolotui trainer against ultralytics' YOLOv9t.

Both train on the same demo data (128 training images) at 320 px, batch 8, in this process, one after the
other, with the same torch thread count and the same data-loader worker count (ultralytics forces 0 workers on
the CPU, so yolotui runs with 0 too unless --workers says otherwise). Each side runs its whole training loop:
data loading and augmentation, forward, loss and assignment, backward, gradient accumulation to the nominal
batch 64, optimizer and EMA. The first `--skip` batches (start-up, allocator warm-up) are not timed; the next
`--batches` are, from the end of one step to the end of the next, and then training is stopped.

ultralytics is a benchmark-only dependency, never a runtime one. It is imported when importable (e.g. from
`--ultralytics-site DIR`, a folder made with `pip install --no-deps --target DIR ultralytics ...`, kept out of
the venv), with YOLO_OFFLINE=1 and a throw-away YOLO_CONFIG_DIR so it neither reaches the network nor writes
settings into the home folder; its model is built from 'yolov9t.yaml' (no weights download), plots are off.

Architectures differ: the official (and yolotui) yolov9-t trains with the auxiliary PGI branch (16.5 GFLOPs
at 640), ultralytics' YOLOv9t has no auxiliary branch (like yolotui's gelan-t, 10.1 GFLOPs). The ratio is
printed for the requested --cfg list (default: yolov9-t, the issue's target, and gelan-t, the like-for-like).

Usage: python bench/bench_train_speed.py [--cfg yolov9-t gelan-t] [--batches 10] [--skip 2] [--threads 2] [--rounds 1]
       [--ultralytics-site DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

IMG, BATCH = 320, 8


def _rate(stamps: list[tuple[float, int]], skip: int) -> float:
    """Images per second between the end of step `skip` and the last timed step."""
    timed = stamps[skip:]
    if len(timed) < 2:
        raise RuntimeError(f"only {len(stamps)} steps were timed; lower --skip or raise --batches")
    images = sum(n for _, n in timed[1:])
    return images / (timed[-1][0] - timed[0][0])


def yolotui_rate(data_yaml: Path, cfg: str, folder: Path, skip: int, batches: int, workers: int,
                 precision: str = "auto", compile_model: bool = False) -> float:
    """Images/s of the yolotui Trainer (full training step incl. data loading), stopped after the timed steps;
    `precision` is its --precision (auto: bf16 autocast on CPUs with native bf16), `compile_model` its --compile
    (the compile happens in the first, untimed, step)."""
    from yolotui.config import default_options, load_hyp, validate_options
    from yolotui.configs import resolve_hyp
    from yolotui.engine.train.trainer import Trainer
    from yolotui.jobs.launch import write_run_files

    opt, _ = validate_options(default_options(cfg=cfg, data=str(data_yaml), imgsz=IMG, batch_size=BATCH, epochs=1,
                                              device="cpu", workers=workers, project=str(folder), name=cfg,
                                              close_mosaic=0, patience=0, precision=precision,
                                              compile=compile_model))
    run_dir = folder / cfg
    (run_dir / "weights").mkdir(parents=True, exist_ok=True)
    write_run_files(run_dir, opt, load_hyp(resolve_hyp(None)))
    trainer = Trainer(run_dir)
    trainer.setup()
    stamps: list[tuple[float, int]] = []
    step = trainer._train_step

    def timed_step(batch, ni):
        items = step(batch, ni)
        stamps.append((time.perf_counter(), int(batch["img"].shape[0])))
        if len(stamps) >= skip + 1 + batches:
            trainer.requests.stop = True  # the trainer's own stop path: checkpoint, then return
        return items

    trainer._train_step = timed_step
    trainer.train()
    return _rate(stamps, skip)


def ultralytics_rate(data_yaml: Path, folder: Path, skip: int, batches: int, workers: int,
                     threads: int) -> float | None:
    """Images/s of ultralytics' YOLOv9t training loop on the same data, or None when it is not importable."""
    try:
        from ultralytics import YOLO, settings
    except ImportError:
        return None
    import torch

    # its logging integrations (MLflow, TensorBoard, W&B ... when installed) would write into the working folder
    settings.update({key: False for key in ("mlflow", "tensorboard", "wandb", "clearml", "comet", "dvc", "neptune",
                                            "raytune", "hub") if key in settings})
    stamps: list[tuple[float, int]] = []

    def on_batch_end(trainer) -> None:
        stamps.append((time.perf_counter(), int(trainer.batch_size)))
        if len(stamps) >= skip + 1 + batches:
            trainer.stop = True

    def on_train_start(_trainer) -> None:
        torch.set_num_threads(threads)  # its select_device sets cpu_count - 1 threads (1 on a 2-core machine)

    model = YOLO("yolov9t.yaml")
    model.add_callback("on_train_start", on_train_start)
    model.add_callback("on_train_batch_end", on_batch_end)
    model.train(data=str(data_yaml), epochs=1, imgsz=IMG, batch=BATCH, device="cpu", workers=workers, val=False,
                plots=False, verbose=False, amp=False, project=str(folder), name="ultralytics", exist_ok=True,
                close_mosaic=0, seed=0, deterministic=False)
    return _rate(stamps, skip)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cfg", nargs="+", default=["yolov9-t", "gelan-t"], help="yolotui models to time")
    parser.add_argument("--batches", type=int, default=10, help="timed batches per side")
    parser.add_argument("--skip", type=int, default=2, help="untimed batches at the start")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (both sides)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="alternate the sides this many times and keep each side's best rate (busy machines)")
    parser.add_argument("--workers", type=int, default=0, help="data-loader workers (ultralytics forces 0 on CPU)")
    parser.add_argument("--ultralytics-site", default=os.environ.get("ULTRALYTICS_SITE"),
                        help="folder holding ultralytics and its pure-python deps (appended to sys.path)")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="bench-train-speed-"))
    os.environ.setdefault("YOLO_OFFLINE", "1")
    os.environ.setdefault("YOLO_CONFIG_DIR", str(folder / "ultralytics-config"))
    if args.ultralytics_site:
        sys.path.append(str(Path(args.ultralytics_site).resolve()))
    import torch

    from yolotui.datasets import make_demo_dataset

    data_yaml = Path(make_demo_dataset(folder / "data", n_train=128, n_val=32, img=256))
    theirs: float | None = None
    ours: dict[str, float] = {}
    for round_index in range(args.rounds):
        rate = ultralytics_rate(data_yaml, folder / f"u{round_index}", args.skip, args.batches, args.workers,
                                args.threads)
        theirs = None if rate is None else max(rate, theirs or 0.0)
        for cfg in args.cfg:
            torch.set_num_threads(args.threads)
            rate = yolotui_rate(data_yaml, cfg, folder / f"y{round_index}", args.skip, args.batches, args.workers)
            ours[cfg] = max(rate, ours.get(cfg, 0.0))
    print(f"training speed, CPU, {IMG} px, batch {BATCH}, {args.threads} torch threads, {args.workers} workers, "
          f"{args.batches} timed batches after {args.skip}, best of {args.rounds} round(s):")
    print(f"  ultralytics YOLOv9t: {'not importable' if theirs is None else f'{theirs:.2f} img/s'}")
    for cfg, rate in ours.items():
        ratio = f"{rate / theirs:.2f}" if theirs else "n/a (ultralytics not importable)"
        print(f"  yolotui {cfg}: {rate:.2f} img/s; ratio yolotui/ultralytics {ratio}")


if __name__ == "__main__":
    main()
