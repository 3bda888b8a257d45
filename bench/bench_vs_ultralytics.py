"""yolotui against ultralytics on the CPU: images/s of the whole training loop, of the model step and of validation.

Both sides use the same generated data (the demo shapes), image size, batch, epochs and torch threads, in this
one process, one after the other; with `--rounds N` the sides alternate N times and the median of each
round's ratio is printed (run it on a quiet machine: other load skews whichever side it lands on).

- whole loop: each real trainer (data loading and augmentation, forward, loss and assignment, backward,
  optimizer, EMA), timed between the end of batch `--skip` and the last of `--batches` (bench_train_speed.py);
- model step: forward + loss + backward + SGD step on one fixed batch, each model prepared as its trainer
  prepares it (yolotui: yolotui.engine.train.memory_format);
- validation: each validator over the generated val split with the same model weights state (fresh
  random init, so NMS sees many boxes on both sides), conf 0.001, IoU 0.7, multi-label.

yolotui gelan-t and ultralytics YOLOv9t are the like-for-like pair (no auxiliary branch); yolotui yolov9-t
also trains the PGI auxiliary branch.

ultralytics is never a yolotui dependency. Install it for this bench only, outside the project venv:

    python3 -m venv /tmp/ulvenv
    echo "$(python -c 'import site; print(site.getsitepackages()[0])')" \\
        > /tmp/ulvenv/lib/python3.11/site-packages/project-venv.pth     # share torch & co. with the project venv
    /tmp/ulvenv/bin/pip install --no-deps ultralytics
    /tmp/ulvenv/bin/pip install matplotlib polars ultralytics-thop

then run this script with the project's python and `--ultralytics-site /tmp/ulvenv/lib/python3.11/site-packages`
(the default when that folder exists), or with /tmp/ulvenv/bin/python directly.

Usage: python bench/bench_vs_ultralytics.py [--cfg gelan-t yolov9-t] [--rounds 3] [--threads 2] [--imgsz 320]
       [--batch 8] [--batches 24] [--skip 2] [--steps 6] [--parts loop step val] [--precision fp32] [--compile]
       [--host-memory keep|release]
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
sys.path.insert(0, str(ROOT / "bench"))

DEFAULT_SITE = "/tmp/ulvenv/lib/python3.11/site-packages"
INSTALL_HINT = ("ultralytics is not importable. Install it for this bench only (not into the project venv):\n"
                "  python3 -m venv /tmp/ulvenv\n"
                "  echo \"$(python -c 'import site; print(site.getsitepackages()[0])')\" > "
                "/tmp/ulvenv/lib/python3.11/site-packages/project-venv.pth\n"
                "  /tmp/ulvenv/bin/pip install --no-deps ultralytics && "
                "/tmp/ulvenv/bin/pip install matplotlib polars ultralytics-thop\n"
                f"then rerun with --ultralytics-site {DEFAULT_SITE}")


# ---------------------------------------------------------------- model step

def _fixed_batch(data_yaml: Path, imgsz: int, batch: int):
    """One augmented training batch (dict: img uint8 [B,3,S,S], targets [N,6]) from yolotui's loader."""
    from yolotui.engine.data import YoloDataset, build_loader
    from yolotui.engine.data.pipeline import load_data

    data = load_data({"data": str(data_yaml)})
    dataset = YoloDataset(data.train, imgsz=imgsz, augment=True, seed=0)
    return next(iter(build_loader(dataset, batch_size=batch, workers=0, shuffle=True, seed=0))), data.nc


def _time_steps(step, steps: int, images: int) -> float:
    step()  # warm-up (allocator, lazy criterion)
    step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return steps * images / (time.perf_counter() - start)


def yolotui_step_rate(cfg: str, batch: dict, nc: int, steps: int, precision: str = "auto",
                      compile_model: bool = False) -> float:
    """Images/s of forward + loss + backward + SGD step of a yolotui model, prepared as the trainer does
    (memory format, the autocast dtype `--precision` gives on this CPU, torch.compile with `--compile`: compiled
    in the untimed warm-up steps, its compile time printed)."""
    import torch

    from yolotui.config import load_hyp
    from yolotui.configs import resolve_hyp
    from yolotui.engine.loss.yolo_loss import loss_for_model
    from yolotui.engine.model import build_model
    from yolotui.engine.train.compiled import training_forward
    from yolotui.engine.train.memory_format import prepare_for_training, training_memory_format
    from yolotui.engine.train.optim import build_optimizer
    from yolotui.engine.train.precision import autocast_dtype, to_float32

    torch.manual_seed(0)
    device = torch.device("cpu")
    model = prepare_for_training(build_model(cfg, nc=nc), device).train()
    loss_fn = loss_for_model(model, load_hyp(resolve_hyp(None)), 0.0)
    optimizer = build_optimizer(model, "SGD", 0.01, 0.937, 5e-4)
    memory_format = training_memory_format(device)
    imgs = (batch["img"].float() / 255).contiguous(memory_format=memory_format)
    targets = batch["targets"]

    amp = autocast_dtype(device, precision)
    forward = training_forward(model, compile_model, emit=lambda kind_, **fields: print(
        f"      {cfg}: {kind_} {fields.get('seconds', fields.get('message', ''))}", flush=True))

    def step() -> None:
        with torch.autocast(device_type="cpu", dtype=amp, enabled=amp is not None):
            preds = forward(imgs)
        loss, _ = loss_fn(to_float32(preds), targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return _time_steps(step, steps, imgs.shape[0])


def ultralytics_step_rate(batch: dict, nc: int, steps: int, channels_last: bool = False) -> float:
    """Images/s of the same step for ultralytics' YOLOv9t (its DetectionModel and v8 detection loss).

    The images reach it as its own trainer hands them over: contiguous NCHW (ultralytics' Format transform makes
    each image a contiguous CHW array; its collate stacks them; `preprocess_batch` keeps that layout), so its model
    runs NCHW. yolotui's loader collates channels_last, and a channels_last input would carry that layout through
    ultralytics' whole model: `channels_last=True` measures ultralytics so, with yolotui's layout choice lent to it.
    """
    import torch
    from ultralytics.cfg import get_cfg
    from ultralytics.nn.tasks import DetectionModel

    torch.manual_seed(0)
    model = DetectionModel("yolov9t.yaml", nc=nc, verbose=False).train()
    model.args = get_cfg()
    layout = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(memory_format=layout)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.937, nesterov=True)
    targets = batch["targets"]
    ubatch = {"img": (batch["img"].float() / 255).contiguous(memory_format=layout), "batch_idx": targets[:, 0],
              "cls": targets[:, 1:2], "bboxes": targets[:, 2:6]}

    def step() -> None:
        loss, _ = model.loss(ubatch)
        loss.sum().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return _time_steps(step, steps, ubatch["img"].shape[0])


# ---------------------------------------------------------------- validation

def yolotui_val_rate(cfg: str, data_yaml: Path, imgsz: int, batch: int) -> float:
    """Images/s of yolotui's validation (loader in rectangular batches, model, NMS, metrics)."""
    import torch

    from yolotui.engine.data import YoloDataset, build_loader
    from yolotui.engine.data.pipeline import load_data
    from yolotui.engine.evaluate.validate import validate
    from yolotui.engine.model import build_model

    torch.manual_seed(0)
    data = load_data({"data": str(data_yaml)})
    model = build_model(cfg, nc=data.nc)
    start = time.perf_counter()
    dataset = YoloDataset(data.val, imgsz=imgsz, augment=False, rect=True, batch_size=batch, shapes=data.val_shapes)
    loader = build_loader(dataset, batch_size=batch, workers=0, shuffle=False)
    result = validate(model, loader, "cpu", data.nc, data.names)
    return result.images / (time.perf_counter() - start)


def ultralytics_val_rate(data_yaml: Path, imgsz: int, batch: int, folder: Path) -> float:
    """Images/s of ultralytics' validator on the same split with a fresh YOLOv9t."""
    import torch
    from ultralytics import YOLO

    torch.manual_seed(0)
    model = YOLO("yolov9t.yaml")
    start = time.perf_counter()
    metrics = model.val(data=str(data_yaml), imgsz=imgsz, batch=batch, device="cpu", workers=0, plots=False,
                        verbose=False, project=str(folder), name="val", exist_ok=True, half=False)
    images = int(getattr(metrics, "seen", 0) or 0) or _count_val_images(data_yaml)
    return images / (time.perf_counter() - start)


def _count_val_images(data_yaml: Path) -> int:
    from yolotui.datasets import list_images, load_data_yaml

    return len(list_images(load_data_yaml(data_yaml).split("val")))


# ---------------------------------------------------------------- main

def _ratio_line(name: str, ours: list[float], theirs: list[float],
                names: tuple[str, str] = ("yolotui", "ultralytics")) -> str:
    ratios = [a / b for a, b in zip(ours, theirs) if b]
    per_round = ", ".join(f"{r:.2f}" for r in ratios)
    median = statistics.median(ratios) if ratios else float("nan")
    return (f"  {name}: {names[0]} {statistics.median(ours):.2f} img/s, {names[1]} {statistics.median(theirs):.2f} "
            f"img/s; ratio median {median:.2f}x (rounds: {per_round})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cfg", nargs="+", default=["gelan-t", "yolov9-t"], help="yolotui models")
    parser.add_argument("--rounds", type=int, default=1, help="alternate the sides this many times; median ratio")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (both sides)")
    parser.add_argument("--imgsz", type=int, default=320)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--batches", type=int, default=24,
                        help="timed batches of the whole loop (fewer were too noisy on a 2-core VM)")
    parser.add_argument("--skip", type=int, default=2, help="untimed batches at the start of the whole loop")
    parser.add_argument("--steps", type=int, default=6, help="timed model steps")
    parser.add_argument("--workers", type=int, default=0,
                        help="data-loader workers of the whole loop, both sides (ultralytics uses 0 on the CPU)")
    parser.add_argument("--precision", choices=("auto", "fp32"), default="auto",
                        help="yolotui's --precision (auto: bf16 autocast on CPUs with native bf16; ultralytics "
                             "trains in fp32 on the CPU either way)")
    parser.add_argument("--compile", action="store_true",
                        help="yolotui's --compile (torch.compile; compile time excluded from the timed steps); the "
                             "model step is then also measured uncompiled, for the compile gain")
    parser.add_argument("--parts", nargs="+", choices=("loop", "step", "val"), default=["loop", "step", "val"])
    parser.add_argument("--ultralytics-channels-last", action="store_true",
                        help="model step: hand ultralytics its images and model channels_last, as yolotui trains "
                             "(its own trainer runs NCHW; this measures it with yolotui's layout lent to it)")
    parser.add_argument("--host-memory", choices=("keep", "release"), default="keep",
                        help="keep: this process reuses freed host memory, as every yolotui trainer process does "
                             "(yolotui.engine.train.memory_format.keep_freed_memory; it applies to both sides, and "
                             "ultralytics' step rate is the same either way); release: the C library's defaults")
    parser.add_argument("--ultralytics-site", default=os.environ.get("ULTRALYTICS_SITE", DEFAULT_SITE),
                        help=f"site-packages holding ultralytics (default {DEFAULT_SITE} when it exists)")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="bench-vs-ultralytics-"))
    os.environ.setdefault("YOLO_OFFLINE", "1")
    os.environ.setdefault("YOLO_CONFIG_DIR", str(folder / "ultralytics-config"))
    if args.ultralytics_site and Path(args.ultralytics_site).is_dir():
        sys.path.append(str(Path(args.ultralytics_site).resolve()))
    try:
        import ultralytics  # noqa: F401
    except ImportError:
        print(INSTALL_HINT, file=sys.stderr)
        return 2
    import bench_train_speed as loop_bench
    import torch

    from yolotui.engine.train.memory_format import keep_freed_memory

    if args.host_memory == "release":
        os.environ["YOLOTUI_HOST_MEMORY"] = "release"
    host_memory = keep_freed_memory()

    from yolotui.datasets import make_demo_dataset

    loop_bench.IMG, loop_bench.BATCH = args.imgsz, args.batch
    torch.set_num_threads(args.threads)
    data_yaml = Path(make_demo_dataset(folder / "data", n_train=128, n_val=32, img=256))
    batch, nc = _fixed_batch(data_yaml, args.imgsz, args.batch)
    results: dict[tuple[str, str], list[float]] = {}

    def record(part: str, side: str, rate: float) -> None:
        results.setdefault((part, side), []).append(rate)
        print(f"    {part:5s} {side:22s} {rate:7.2f} img/s", flush=True)

    for r in range(args.rounds):
        print(f"round {r + 1}/{args.rounds}", flush=True)
        if "step" in args.parts:
            record("step", "ultralytics", ultralytics_step_rate(batch, nc, args.steps, args.ultralytics_channels_last))
            for cfg in args.cfg:
                torch.set_num_threads(args.threads)
                record("step", cfg, yolotui_step_rate(cfg, batch, nc, args.steps, args.precision, args.compile))
                if args.compile:  # the same model uncompiled, for the compile gain in this process
                    torch.set_num_threads(args.threads)
                    record("step", f"{cfg} eager", yolotui_step_rate(cfg, batch, nc, args.steps, args.precision))
        if "loop" in args.parts:
            record("loop", "ultralytics", loop_bench.ultralytics_rate(data_yaml, folder / f"u{r}", args.skip,
                                                                     args.batches, args.workers, args.threads))
            for cfg in args.cfg:
                torch.set_num_threads(args.threads)
                record("loop", cfg, loop_bench.yolotui_rate(data_yaml, cfg, folder / f"y{r}", args.skip,
                                                            args.batches, args.workers, args.precision,
                                                            args.compile))
        if "val" in args.parts:
            torch.set_num_threads(args.threads)
            record("val", "ultralytics", ultralytics_val_rate(data_yaml, args.imgsz, args.batch, folder / f"uv{r}"))
            for cfg in args.cfg:
                torch.set_num_threads(args.threads)
                record("val", cfg, yolotui_val_rate(cfg, data_yaml, args.imgsz, args.batch))

    from yolotui.engine.train.precision import autocast_dtype, describe

    precision_word = describe(autocast_dtype(torch.device("cpu"), args.precision))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\nyolotui vs ultralytics YOLOv9t, CPU, {args.imgsz} px, batch {args.batch}, {args.threads} threads, "
          f"{args.workers} loop workers, yolotui --precision {args.precision} ({precision_word})"
          f"{' --compile' if args.compile else ''}, {host_memory}, ultralytics step "
          f"{'channels_last (lent)' if args.ultralytics_channels_last else 'NCHW (as its trainer)'}, {args.rounds} round(s); load average now {load:.2f} on {os.cpu_count()} "
          "CPUs (quote only quiet-machine runs):")
    for part in ("loop", "step", "val"):
        if part not in args.parts:
            continue
        for cfg in args.cfg:
            print(_ratio_line(f"{part} {cfg}", results[(part, cfg)], results[(part, "ultralytics")]))
    if args.compile and "step" in args.parts:
        for cfg in args.cfg:
            print(_ratio_line(f"compile gain {cfg}", results[("step", cfg)], results[("step", f"{cfg} eager")],
                              names=("compiled", "eager")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
