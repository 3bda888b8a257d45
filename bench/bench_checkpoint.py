"""Checkpoint cost and resume latency.

1. Checkpoint write time as a fraction of epoch time: yolov9-s (default) at 640 px on the CPU, a small epoch
   (--images training images); the epoch measured in the same run is the baseline.
2. Seconds from `yolotui resume RUN` to the first training step (first `batch` event), against the seconds
   from `yolotui train` to its first step measured in the same run (ratio resume / fresh start).

Usage: python bench/bench_checkpoint.py [--cfg yolov9-s] [--img 640] [--images 8] [--batch 4] [--skip-resume]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from yolotui.config import default_options, load_hyp, validate_options  # noqa: E402
from yolotui.configs import resolve_hyp  # noqa: E402
from yolotui.datasets import make_demo_dataset  # noqa: E402
from yolotui.jobs.launch import write_run_files  # noqa: E402
from yolotui.runs.events import read_events  # noqa: E402


def make_run(folder: Path, data: Path, cfg: str, img: int, batch: int, epochs: int, name: str) -> Path:
    """A run folder with opt.yaml and hyp.yaml (what `yolotui train` writes)."""
    opt, _ = validate_options(default_options(cfg=cfg, data=str(data), imgsz=img, batch_size=batch, epochs=epochs,
                                              device="cpu", workers=0, project=str(folder), name=name))
    run_dir = folder / name
    (run_dir / "weights").mkdir(parents=True, exist_ok=True)
    write_run_files(run_dir, opt, load_hyp(resolve_hyp(None)))
    return run_dir


def checkpoint_fraction(run_dir: Path) -> tuple[float, float, int]:
    """(epoch seconds, checkpoint seconds, checkpoint bytes) for one training epoch and one last.pt write."""
    from yolotui.engine.train.trainer import Trainer

    trainer = Trainer(run_dir)
    trainer.setup()
    trainer.save_period_s = 1e9
    trainer.last_save_time = time.monotonic()
    started = time.perf_counter()
    trainer._train_epoch(0, 0)
    epoch_s = time.perf_counter() - started
    started = time.perf_counter()
    trainer._save_mid_epoch(0, trainer.batches)
    checkpoint_s = time.perf_counter() - started
    return epoch_s, checkpoint_s, (run_dir / "weights" / "last.pt").stat().st_size


def seconds_to_first_step(argv: list[str], run_dir: Path, env: dict[str, str], after_ts: float) -> float:
    """Run a CLI command and time until the run's first batch event newer than `after_ts`."""
    started = time.time()
    subprocess.run(argv, env=env, check=True, capture_output=True)
    while time.time() - started < 600:
        for event in read_events(run_dir / "events.jsonl"):
            if event.get("type") == "batch" and event["ts"] > after_ts:
                return event["ts"] - started
        time.sleep(0.05)
    raise RuntimeError("no training step within 600 s")


def wait_stopped(run_dir: Path) -> None:
    from yolotui.runs.layout import ENDED_STATES
    from yolotui.runs.status import effective_state

    while effective_state(run_dir) not in ENDED_STATES:
        time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cfg", default="yolov9-s")
    parser.add_argument("--img", type=int, default=640)
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--skip-resume", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    folder = Path(tempfile.mkdtemp(prefix="bench-ckpt-"))
    data = make_demo_dataset(folder / "data", n_train=args.images, n_val=2, img=args.img)

    run_dir = make_run(folder, data, args.cfg, args.img, args.batch, 1, "fraction")
    epoch_s, checkpoint_s, size = checkpoint_fraction(run_dir)
    print(f"{args.cfg} {args.img}px, {args.images} images, batch {args.batch}, CPU x{args.threads}: epoch "
          f"{epoch_s:.2f} s, checkpoint {checkpoint_s:.3f} s ({size / 1e6:.1f} MB); "
          f"checkpoint / epoch = {checkpoint_s / epoch_s:.4f}")
    if args.skip_resume:
        return

    env = {**os.environ, "PYTHONPATH": str(ROOT), "YOLOTUI_TORCH_THREADS": str(args.threads),
           "YOLOTUI_HOME": str(folder / "home")}
    cli = [sys.executable, "-m", "yolotui"]
    run_dir = folder / "latency"
    fresh_argv = [*cli, "train", "--cfg", args.cfg, "--data", str(data), "--img", str(args.img), "--batch",
                  str(args.batch), "--epochs", "3", "--device", "cpu", "--workers", "0", "--project", str(folder),
                  "--name", "latency"]
    fresh_s = seconds_to_first_step(fresh_argv, run_dir, env, 0.0)
    time.sleep(1.0)
    subprocess.run([*cli, "stop", str(run_dir)], env=env, capture_output=True)
    wait_stopped(run_dir)
    stopped_at = time.time()
    resume_s = seconds_to_first_step([*cli, "resume", str(run_dir)], run_dir, env, stopped_at)
    subprocess.run([*cli, "stop", str(run_dir)], env=env, capture_output=True)
    wait_stopped(run_dir)
    print(f"first training step: fresh `yolotui train` {fresh_s:.2f} s, `yolotui resume` {resume_s:.2f} s; "
          f"resume / fresh = {resume_s / fresh_s:.3f}")


if __name__ == "__main__":
    main()
