"""Training throughput and convergence on the demo data, CPU.

1. Throughput: training images per second at 320 px, batch 8, yolov9-t on the demo data (the yolotui training
   step: forward, loss, backward, optimizer). When `ultralytics` is importable (a benchmark-only dependency)
   its YOLOv9t is trained on the same data in the same run and the ratio yolotui / ultralytics is printed;
   otherwise the ratio is reported as unavailable.
2. Convergence (--epochs N > 0): gelan-t (default) trained on the demo data (128 train / 32 val images,
   256 px) for N epochs through the real trainer; prints mAP50 per epoch and the wall time.

Usage: python bench/bench_train.py [--steps 10] [--epochs 0] [--threads 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from yolotui.datasets import make_demo_dataset  # noqa: E402


def yolotui_images_per_second(data_yaml: Path, cfg: str, img: int, batch: int, steps: int) -> float:
    """Images/s of the yolotui training step on demo batches (after two warm-up steps)."""
    from yolotui.engine import components
    from yolotui.engine.data.dataset import YoloDataset
    from yolotui.engine.data.loader import build_loader, set_loader_epoch
    from yolotui.engine.optim import build_optimizer

    data = components.load_data({"data": str(data_yaml), "min_items": 0})
    model = components.build_model(cfg, nc=data.nc).train()
    loss_fn = components.build_loss(model, {"box": 7.5, "cls": 0.5, "dfl": 1.5}, 0.0)
    optimizer = build_optimizer(model, "SGD", 0.01, 0.937, 0.0005)
    loader = build_loader(YoloDataset(data.train, imgsz=img, augment=True), batch, workers=2, seed=0)
    set_loader_epoch(loader, 0, mosaic=True)
    batches = [b for _, b in zip(range(steps + 2), loader)]
    count, started = 0, 0.0
    for i, batch_dict in enumerate(batches):
        if i == 2:
            count, started = 0, time.perf_counter()
        imgs = batch_dict["img"].float() / 255
        loss, _ = loss_fn(model(imgs), batch_dict["targets"])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        count += imgs.shape[0]
    return count / (time.perf_counter() - started)


def ultralytics_images_per_second(data_yaml: Path, img: int, batch: int) -> float | None:
    """Images/s of ultralytics' YOLOv9t for one epoch on the same data, or None when it is not installed."""
    try:
        from ultralytics import YOLO
    except ImportError:
        return None
    model = YOLO("yolov9t.yaml")
    started = time.perf_counter()
    model.train(data=str(data_yaml), epochs=1, imgsz=img, batch=batch, device="cpu", workers=2, val=False,
                plots=False, verbose=False, project=tempfile.mkdtemp(), amp=False)
    images = len(list((data_yaml.parent / "images" / "train").glob("*")))
    return images / (time.perf_counter() - started)


def convergence(data_yaml: Path, cfg: str, epochs: int, folder: Path) -> None:
    """Train through the real trainer and print mAP50 per epoch."""
    from yolotui.commands._launch import write_run_files
    from yolotui.config import default_options, load_hyp, validate_options
    from yolotui.configs import resolve_hyp
    from yolotui.engine.trainer import Trainer
    from yolotui.runs.results import read_rows

    opt, _ = validate_options(default_options(cfg=cfg, data=str(data_yaml), imgsz=256, batch_size=16,
                                              epochs=epochs, device="cpu", workers=2, project=str(folder),
                                              name="converge", close_mosaic=max(1, epochs // 3), patience=0))
    run_dir = folder / "converge"
    (run_dir / "weights").mkdir(parents=True, exist_ok=True)
    write_run_files(run_dir, opt, load_hyp(resolve_hyp(None)))
    started = time.perf_counter()
    trainer = Trainer(run_dir)
    trainer.setup()
    trainer.train()
    minutes = (time.perf_counter() - started) / 60
    rows = read_rows(run_dir / "results.csv")
    for row in rows:
        print(f"  epoch {int(row['epoch']) + 1}: mAP50 {row['metrics/mAP_0.5']:.3f} "
              f"mAP50-95 {row['metrics/mAP_0.5:0.95']:.3f}")
    best = max(row["metrics/mAP_0.5"] for row in rows)
    print(f"{cfg} on the demo data, {epochs} epochs: best mAP50 {best:.3f} in {minutes:.1f} min")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=0, help="convergence epochs (0: skip)")
    parser.add_argument("--cfg", default="gelan-t", help="model for the convergence run")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    folder = Path(tempfile.mkdtemp(prefix="bench-train-"))
    data_yaml = Path(make_demo_dataset(folder / "data", n_train=128, n_val=32, img=256))
    ours = yolotui_images_per_second(data_yaml, "yolov9-t", 320, 8, args.steps)
    theirs = ultralytics_images_per_second(data_yaml, 320, 8)
    ratio = f"{ours / theirs:.2f}" if theirs else "n/a (ultralytics not importable)"
    print(f"yolov9-t 320 px batch 8, CPU x{args.threads}: yolotui {ours:.2f} img/s; "
          f"ultralytics {theirs if theirs is None else round(theirs, 2)} img/s; ratio {ratio}")
    if args.epochs > 0:
        convergence(data_yaml, args.cfg, args.epochs, folder)


if __name__ == "__main__":
    main()
