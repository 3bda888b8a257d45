"""Short-run convergence side by side: yolotui against ultralytics on the same generated data, from scratch, CPU.

Generates the demo data set (128 training and 32 validation images of coloured shapes, 256 px, 5 classes) once,
then trains, one after the other in this process:

- yolotui: the model `--cfg` (default gelan-t) through the real trainer (the code `yolotui train` runs: loss,
  assigner, optimizer, warmup, EMA, validation of the EMA model after every epoch) with the hyperparameters
  `yolotui train` would choose for this run (`--hyp` overrides: e.g. `--hyp hyp.scratch-high.yaml` for the
  official recipe);
- ultralytics: YOLOv9t from `yolov9t.yaml` with its own defaults (optimizer "auto", its augmentation), the
  same image size, batch, epochs, data-loader workers and torch threads.

Each side's wall time runs from the start of its training call to its end (set-up, every epoch's training and
validation, checkpoints). mAP figures are each tool's validation of its EMA model after the last epoch on the
same 32 validation images. `--rounds N` alternates the sides N times and prints the median of each. Run it on
a quiet machine: other load lands on whichever side is training.

ultralytics is never a yolotui dependency: install it for this bench only (see bench_vs_ultralytics.py, whose
install lines and `--ultralytics-site` this script shares). `--sides yolotui` runs yolotui alone (used by
tests/test_convergence.py, a slow-marked test).

Usage: python bench/bench_convergence.py [--cfg gelan-t] [--epochs 30] [--img 256] [--batch 16] [--hyp FILE]
       [--rounds 1] [--sides yolotui ultralytics] [--workers 0] [--threads 2] [--target 0.5] [--json] [--keep]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

SIDES = ("yolotui", "ultralytics")


def train_yolotui(folder: Path, data_yaml: Path, args: argparse.Namespace) -> dict:
    """Train `args.cfg` with yolotui's trainer on `data_yaml`; per-epoch metrics, the recipe and the wall time."""
    from yolotui.config import default_options, load_hyp, validate_options
    from yolotui.engine.train.trainer import Trainer
    from yolotui.jobs.launch import write_run_files
    from yolotui.jobs.new_run import with_recipe
    from yolotui.runs.results import read_rows

    options = {"cfg": args.cfg, "data": str(data_yaml), "imgsz": args.img, "batch_size": args.batch,
               "epochs": args.epochs, "device": "cpu", "workers": args.workers, "project": str(folder),
               "name": "yolotui", "patience": 0}
    if args.hyp:
        options["hyp"] = args.hyp
    if args.close_mosaic is not None:
        options["close_mosaic"] = args.close_mosaic
    if args.optimizer:
        options["optimizer"] = args.optimizer
    if args.precision:
        options["precision"] = args.precision
    options, notes = with_recipe(options)  # the recipe `yolotui train` picks when --hyp is not given
    opt, _ = validate_options(default_options(**options), notes=notes)
    run_dir = folder / "yolotui"
    (run_dir / "weights").mkdir(parents=True, exist_ok=True)
    write_run_files(run_dir, opt, load_hyp(Path(opt["hyp"])))
    started = time.perf_counter()
    trainer = Trainer(run_dir)
    trainer.setup()
    trainer.train()
    seconds = time.perf_counter() - started
    rows = read_rows(run_dir / "results.csv")
    return {"side": "yolotui", "model": args.cfg, "hyp": Path(opt["hyp"]).name, "seconds": round(seconds, 1),
            "notes": notes,
            "per_epoch": [{"epoch": int(r["epoch"]) + 1, "mAP50": round(float(r["metrics/mAP_0.5"]), 4),
                           "mAP50-95": round(float(r["metrics/mAP_0.5:0.95"]), 4)} for r in rows]}


def train_ultralytics(folder: Path, data_yaml: Path, args: argparse.Namespace) -> dict:
    """Train ultralytics' YOLOv9t with its defaults on `data_yaml`; per-epoch metrics and the wall time."""
    import torch
    from ultralytics import YOLO

    def on_train_start(_trainer) -> None:
        torch.set_num_threads(args.threads)  # its select_device sets cpu_count - 1 threads (1 on a 2-core machine)

    torch.manual_seed(0)
    model = YOLO("yolov9t.yaml")
    model.add_callback("on_train_start", on_train_start)
    started = time.perf_counter()
    model.train(data=str(data_yaml), epochs=args.epochs, imgsz=args.img, batch=args.batch, device="cpu",
                workers=args.workers, plots=False, verbose=False, project=str(folder), name="ultralytics",
                exist_ok=True, seed=0)
    seconds = time.perf_counter() - started
    with open(folder / "ultralytics" / "results.csv", newline="", encoding="utf-8") as handle:
        rows = [{key.strip(): value for key, value in row.items()} for row in csv.DictReader(handle)]
    return {"side": "ultralytics", "model": "YOLOv9t", "hyp": "ultralytics defaults", "seconds": round(seconds, 1),
            "notes": [],
            "per_epoch": [{"epoch": int(float(r["epoch"])), "mAP50": round(float(r["metrics/mAP50(B)"]), 4),
                           "mAP50-95": round(float(r["metrics/mAP50-95(B)"]), 4)} for r in rows]}


def summarise(result: dict, target: float) -> dict:
    """Add the first epoch reaching `target` mAP50, the final and the best figures."""
    per_epoch = result["per_epoch"]
    reached = next((row["epoch"] for row in per_epoch if row["mAP50"] >= target), None)
    final = per_epoch[-1] if per_epoch else {"mAP50": 0.0, "mAP50-95": 0.0}
    best = max(per_epoch, key=lambda row: row["mAP50-95"], default=final)
    return {**result, "epochs": len(per_epoch), "target": target, "reached_at_epoch": reached,
            "final_mAP50": final["mAP50"], "final_mAP50-95": final["mAP50-95"], "best_mAP50-95": best["mAP50-95"],
            "best_epoch": best.get("epoch")}


def _import_ultralytics(site: str | None) -> bool:
    if site and Path(site).is_dir():
        sys.path.append(str(Path(site).resolve()))
    try:
        import ultralytics  # noqa: F401
    except ImportError:
        return False
    return True


def _median(results: list[dict], key: str) -> float:
    return statistics.median(result[key] for result in results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cfg", default="gelan-t", help="yolotui model")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--img", type=int, default=256, help="training and validation image size")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--hyp", default=None, help="yolotui hyperparameters (default: what `yolotui train` picks)")
    parser.add_argument("--close-mosaic", type=int, default=None, help="yolotui --close-mosaic (default: its own)")
    parser.add_argument("--optimizer", default=None, help="yolotui --optimizer (default: its own)")
    parser.add_argument("--precision", default=None, help="yolotui --precision (default: auto)")
    parser.add_argument("--workers", type=int, default=0, help="data-loader workers (both sides)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (both sides)")
    parser.add_argument("--rounds", type=int, default=1, help="alternate the sides this many times; medians")
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES))
    parser.add_argument("--target", type=float, default=0.5, help="mAP50 to reach (first epoch reported)")
    parser.add_argument("--ultralytics-site", default=os.environ.get("ULTRALYTICS_SITE",
                                                                     "/tmp/ulvenv/lib/python3.11/site-packages"))
    parser.add_argument("--json", action="store_true", help="print one JSON object per side and round")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (data, both runs)")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="bench-converge-"))
    if "ultralytics" in args.sides:
        os.environ.setdefault("YOLO_OFFLINE", "1")
        os.environ.setdefault("YOLO_CONFIG_DIR", str(folder / "ultralytics-config"))
        if not _import_ultralytics(args.ultralytics_site):
            from bench_vs_ultralytics import INSTALL_HINT

            print(INSTALL_HINT, file=sys.stderr)
            shutil.rmtree(folder, ignore_errors=True)
            return 2
    try:
        return _compare(folder, args)
    finally:
        if args.keep:
            print(f"kept {folder}", file=sys.stderr)
        else:
            shutil.rmtree(folder, ignore_errors=True)


def _compare(folder: Path, args: argparse.Namespace) -> int:
    """Train the sides in `folder`, print each round and the medians."""
    import torch

    from yolotui.datasets import make_demo_dataset

    data_yaml = Path(make_demo_dataset(folder / "data", n_train=128, n_val=32, img=256))
    runners = {"yolotui": train_yolotui, "ultralytics": train_ultralytics}
    results: dict[str, list[dict]] = {side: [] for side in args.sides}
    for round_index in range(args.rounds):
        for side in args.sides:
            torch.set_num_threads(args.threads)
            result = summarise(runners[side](folder / f"{side}{round_index}", data_yaml, args), args.target)
            results[side].append(result)
            if args.json:
                print(json.dumps(result), flush=True)
            else:
                print(f"round {round_index + 1}/{args.rounds} {side} {result['model']} ({result['hyp']}): "
                      f"mAP50 {result['final_mAP50']:.3f}, mAP50-95 {result['final_mAP50-95']:.3f} after "
                      f"{result['epochs']} epochs in {result['seconds']:.0f} s", flush=True)
    if args.json:
        return 0
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\n{args.epochs} epochs from scratch on the demo data (128 train / 32 val, 5 classes), {args.img} px, "
          f"batch {args.batch}, {args.threads} threads, {args.workers} workers, CPU; load average now {load:.2f} "
          f"on {os.cpu_count()} CPUs (quote only quiet-machine runs); medians of {args.rounds} round(s):")
    for side in args.sides:
        runs = results[side]
        rounds = ", ".join(f"{r['final_mAP50-95']:.3f}/{r['seconds']:.0f}s" for r in runs)
        print(f"  {side:12s} {runs[0]['model']:8s} mAP50 {_median(runs, 'final_mAP50'):.3f}  mAP50-95 "
              f"{_median(runs, 'final_mAP50-95'):.3f}  wall {_median(runs, 'seconds'):.0f} s   (rounds: {rounds})")
    if len(args.sides) == 2:
        ours, theirs = results["yolotui"], results["ultralytics"]
        print(f"  yolotui / ultralytics: mAP50-95 {_median(ours, 'final_mAP50-95') / max(_median(theirs, 'final_mAP50-95'), 1e-9):.2f}x, "
              f"wall time {_median(ours, 'seconds') / max(_median(theirs, 'seconds'), 1e-9):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
