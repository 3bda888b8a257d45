"""Convergence on the demo data: does the yolotui engine learn, and how fast, on this machine's CPU?

Generates the demo data set (128 training and 32 validation images of coloured shapes, 256 px), trains a small
model on it from scratch through the real trainer (the code `yolotui train` runs: loss, assigner, optimizer,
warmup, EMA, validation on the EMA model after every epoch) and prints, per epoch, mAP50 and mAP50-95 on the
validation images, then the epoch at which mAP50 first reached the target, the final figures and the wall time.

The baseline the figures are judged against is the target itself (mAP50 >= 0.5, issue 5); pass
`--hyp hyp.scratch-high.yaml` to see the official from-scratch recipe on the same budget for comparison.
`--json` prints one JSON object instead (used by tests/test_convergence.py, a slow-marked test).

Usage: python bench/bench_convergence.py [--cfg gelan-t] [--epochs 50] [--img 160] [--batch 16]
       [--hyp hyp.demo.yaml] [--threads 2] [--target 0.5] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def train_demo(folder: Path, cfg: str, epochs: int, imgsz: int, batch: int, hyp: str, workers: int,
               close_mosaic: int) -> dict:
    """Train `cfg` on freshly generated demo data in `folder`; return per-epoch metrics and the wall time."""
    from yolotui.commands._launch import write_run_files
    from yolotui.config import default_options, load_hyp, validate_options
    from yolotui.configs import resolve_hyp
    from yolotui.datasets import make_demo_dataset
    from yolotui.engine.trainer import Trainer
    from yolotui.runs.results import read_rows

    data_yaml = make_demo_dataset(folder / "data", n_train=128, n_val=32, img=256)
    opt, _ = validate_options(default_options(cfg=cfg, data=str(data_yaml), hyp=hyp, imgsz=imgsz, batch_size=batch,
                                              epochs=epochs, device="cpu", workers=workers, project=str(folder),
                                              name="converge", close_mosaic=close_mosaic, patience=0))
    run_dir = folder / "converge"
    (run_dir / "weights").mkdir(parents=True, exist_ok=True)
    write_run_files(run_dir, opt, load_hyp(resolve_hyp(opt["hyp"])))
    started = time.perf_counter()
    trainer = Trainer(run_dir)
    trainer.setup()
    trainer.train()
    seconds = time.perf_counter() - started
    rows = read_rows(run_dir / "results.csv")
    return {
        "cfg": cfg, "epochs": epochs, "imgsz": imgsz, "batch": batch, "hyp": Path(opt["hyp"]).name,
        "seconds": round(seconds, 1),
        "per_epoch": [{"epoch": int(r["epoch"]) + 1, "mAP50": round(float(r["metrics/mAP_0.5"]), 4),
                       "mAP50-95": round(float(r["metrics/mAP_0.5:0.95"]), 4)} for r in rows],
    }


def summarise(result: dict, target: float) -> dict:
    """Add the first epoch reaching `target` mAP50, the final and the best figures."""
    per_epoch = result["per_epoch"]
    reached = next((row["epoch"] for row in per_epoch if row["mAP50"] >= target), None)
    final = per_epoch[-1] if per_epoch else {"mAP50": 0.0, "mAP50-95": 0.0}
    best = max(per_epoch, key=lambda row: row["mAP50"], default=final)
    return {**result, "target": target, "reached_at_epoch": reached, "final_mAP50": final["mAP50"],
            "final_mAP50-95": final["mAP50-95"], "best_mAP50": best["mAP50"], "best_epoch": best.get("epoch")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cfg", default="gelan-t")
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--img", type=int, default=160, help="training and validation image size")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--hyp", default="hyp.demo.yaml", help="hyperparameters (shipped name or path)")
    parser.add_argument("--close-mosaic", type=int, default=None, help="default: a fifth of the epochs")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--target", type=float, default=0.5, help="mAP50 to reach")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    close = args.close_mosaic if args.close_mosaic is not None else max(1, args.epochs // 5)
    with tempfile.TemporaryDirectory(prefix="bench-converge-") as tmp:
        result = summarise(train_demo(Path(tmp), args.cfg, args.epochs, args.img, args.batch, args.hyp,
                                      args.workers, close), args.target)
    if args.json:
        print(json.dumps(result))
        return
    print(f"{args.cfg} on the demo data (128 train / 32 val), {args.img} px, batch {args.batch}, {result['hyp']}, "
          f"CPU x{args.threads}:")
    for row in result["per_epoch"]:
        print(f"  epoch {row['epoch']:3d}: mAP50 {row['mAP50']:.3f}  mAP50-95 {row['mAP50-95']:.3f}")
    reached = result["reached_at_epoch"]
    print(f"target mAP50 >= {args.target}: " + (f"reached at epoch {reached}" if reached else "NOT reached"))
    print(f"final mAP50 {result['final_mAP50']:.3f}, mAP50-95 {result['final_mAP50-95']:.3f} after "
          f"{args.epochs} epochs; wall time {result['seconds'] / 60:.1f} min; ratio final mAP50 / target "
          f"{result['final_mAP50'] / args.target:.2f}")


if __name__ == "__main__":
    main()
