"""Build the validation-parity fixture: a few rectangular images, small weights, and the official validator's numbers.

Run by hand (never by the test suite); it needs a copy of the official YOLOv9 repository and a Python that can
import it. Nothing of the official code is written into the fixture: only images, labels, yolotui-format
weights and the numbers its val.py printed.

    OMP_NUM_THREADS=1 python bench/make_val_parity_fixture.py --demo DEMO_DIR --overfit 300 \\
        --official /tmp/yolov9-copy --official-python /tmp/offvenv/bin/python --imgsz 128 --batch 4

DEMO_DIR is a `yolotui demo-data DIR --img 160 --seed 3` folder. Steps:
1. crop the demo val images into rectangles of several aspect ratios (one upscaled, so the loader resizes
   down with INTER_AREA) and re-derive their labels -> tests/fixtures/val_parity/{images,labels};
2. weights: `--weights` a yolotui checkpoint, or `--overfit N`: gelan-t trained by yolotui's model and loss
   for N AdamW steps on the crops themselves at 96 px (a few minutes on one CPU thread; the committed fixture
   used 300), BatchNorm statistics then recomputed for the final weights; saved as a slim fp16 yolotui
   checkpoint -> weights.pt;
3. rebuild that model as the official `models.yolo.DetectionModel`, load the state dict strictly, pickle it as
   an official checkpoint in a scratch folder, and score it with the official `val.run` (the same as
   `python val.py --data D --weights W --img IMGSZ --batch BATCH --device cpu`);
4. record P, R, mAP50, mAP50-95 and the command in expected.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
FIXTURE = ROOT / "tests" / "fixtures" / "val_parity"

# (height, width, upscale) of each crop; sorted into rect batches of different shapes by the loaders
CROPS = [(160, 120, 1.0), (120, 160, 1.0), (160, 96, 1.0), (100, 160, 1.0), (160, 160, 1.0),
         (128, 160, 1.0), (160, 140, 1.0), (90, 150, 1.0), (150, 90, 1.0), (112, 160, 1.5)]
KEEP_AREA = 0.6  # a box cut by the crop is kept when this share of it remains

_OFFICIAL_RUNNER = r'''
import json, sys, torch
sys.path.insert(0, sys.argv[1])
from models.yolo import DetectionModel
import utils.general
utils.general.check_font = lambda *a, **k: None  # it downloads a font for plots; offline here
import val as official_val
import argparse
official_val.opt = argparse.Namespace(min_items=0)  # run() reads the global its own main() would set
args = json.loads(sys.argv[2])
ckpt = torch.load(args["weights"], map_location="cpu", weights_only=True)
model = DetectionModel(args["cfg"], ch=3, nc=args["nc"])
model.load_state_dict({k: v.float() for k, v in ckpt["model"].items()}, strict=True)
model.names = args["names"]
model.nc = args["nc"]
torch.save({"model": model.half(), "ema": None, "epoch": -1}, args["official_weights"])
results, _, _ = official_val.run(data=args["data"], weights=args["official_weights"], batch_size=args["batch"],
                                 imgsz=args["imgsz"], device="cpu", half=False, workers=0, plots=False,
                                 project=args["project"], name="exp")
print("RESULTS " + json.dumps([float(v) for v in results[:4]]))
'''


def crop_images(demo: Path, out: Path) -> None:
    """Rectangular crops of the first len(CROPS) demo val images, with their labels cut to match."""
    images = sorted((demo / "images" / "val").glob("*.jpg"))
    if len(images) < len(CROPS):
        raise SystemExit(f"{demo}: needs at least {len(CROPS)} val images")
    (out / "images").mkdir(parents=True, exist_ok=True)
    (out / "labels").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for index, (path, (h, w, upscale)) in enumerate(zip(images, CROPS)):
        im = cv2.imread(str(path))
        H, W = im.shape[:2]
        y0, x0 = int(rng.integers(0, H - h + 1)), int(rng.integers(0, W - w + 1))
        crop = im[y0:y0 + h, x0:x0 + w]
        rows = []
        label_file = demo / "labels" / "val" / f"{path.stem}.txt"
        for line in label_file.read_text().split("\n") if label_file.exists() else []:
            if not line.strip():
                continue
            cls, cx, cy, bw, bh = (float(v) for v in line.split())
            x1, y1, x2, y2 = (cx - bw / 2) * W, (cy - bh / 2) * H, (cx + bw / 2) * W, (cy + bh / 2) * H
            cx1, cy1 = np.clip(x1 - x0, 0, w), np.clip(y1 - y0, 0, h)
            cx2, cy2 = np.clip(x2 - x0, 0, w), np.clip(y2 - y0, 0, h)
            if (cx2 - cx1) * (cy2 - cy1) < KEEP_AREA * (x2 - x1) * (y2 - y1):
                continue
            rows.append(f"{int(cls)} {(cx1 + cx2) / 2 / w:.6f} {(cy1 + cy2) / 2 / h:.6f} "
                        f"{(cx2 - cx1) / w:.6f} {(cy2 - cy1) / h:.6f}")
        if upscale != 1.0:
            crop = cv2.resize(crop, (round(w * upscale), round(h * upscale)), interpolation=cv2.INTER_LINEAR)
        name = f"im{index:02d}"
        cv2.imwrite(str(out / "images" / f"{name}.png"), crop)
        (out / "labels" / f"{name}.txt").write_text("\n".join(rows) + ("\n" if rows else ""))


def overfit(out: Path, steps: int, imgsz: int = 96) -> Path:
    """gelan-t trained `steps` AdamW steps on the fixture crops (no augmentation); a yolotui checkpoint path."""
    import torch

    from yolotui.config import load_hyp
    from yolotui.configs import resolve_hyp
    from yolotui.datasets import check_labels, list_images
    from yolotui.engine.data import YoloDataset, build_loader
    from yolotui.engine.loss.yolo_loss import loss_for_model
    from yolotui.engine.model import build_model

    names = ["circle", "square", "triangle", "diamond", "cross"]
    report = check_labels(list_images([str(out / "images")]), len(names))
    dataset = YoloDataset(report, imgsz=imgsz, augment=False)
    batch = next(iter(build_loader(dataset, batch_size=len(dataset), workers=0, shuffle=False)))
    torch.manual_seed(0)
    model = build_model("gelan-t", nc=len(names)).train()
    loss_fn = loss_for_model(model, load_hyp(resolve_hyp(None)), 0.0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.0)
    imgs = batch["img"].float() / 255
    for _ in range(steps):
        loss, _items = loss_fn(model(imgs), batch["targets"])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    with torch.no_grad():  # BatchNorm statistics of the final weights (running averages lag fast-moving ones)
        norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
        for m in norms:
            m.reset_running_stats()
            m.momentum = None
        model(imgs)
        for m in norms:
            m.momentum = 0.03
    path = Path(tempfile.mkdtemp()) / "overfit.pt"
    torch.save({"format": "yolotui-1", "model_yaml": model.yaml, "nc": len(names), "names": names,
                "epoch": steps, "model": model.state_dict()}, path)
    return path


def save_weights(weights: Path, out: Path) -> dict:
    """A slim fp16 yolotui checkpoint (model_yaml, nc, names, EMA state dict as `model`)."""
    import torch

    from yolotui.engine.tools.weights import read_checkpoint

    ckpt = read_checkpoint(weights)
    state = ckpt.get("ema") or ckpt["model"]
    slim = {"format": "yolotui-1", "model_yaml": ckpt["model_yaml"], "nc": ckpt.get("nc"),
            "names": ckpt.get("names"), "epoch": ckpt.get("epoch"),
            "model": {k: (v.half() if v.is_floating_point() else v) for k, v in state.items()}}
    torch.save(slim, out / "weights.pt")
    return slim


def data_yaml(folder: Path, names: list[str], target: Path) -> Path:
    """A data.yaml whose val split is the fixture's images (absolute path, read by both validators)."""
    lines = [f"path: {folder}", "train: images", "val: images", f"nc: {len(names)}", "names:"]
    lines += [f"- {n}" for n in names]
    target.write_text("\n".join(lines) + "\n")
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--demo", type=Path, required=True)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--weights", type=Path, help="a yolotui checkpoint of a 5-class demo model")
    source.add_argument("--overfit", type=int, metavar="STEPS", help="train gelan-t on the crops for STEPS steps")
    parser.add_argument("--official", type=Path, required=True, help="a scratch copy of the official repository")
    parser.add_argument("--official-python", default="/tmp/offvenv/bin/python")
    parser.add_argument("--cfg", default="models/detect/gelan-t.yaml", help="official model yaml (relative)")
    parser.add_argument("--imgsz", type=int, default=160)
    parser.add_argument("--batch", type=int, default=4)
    args = parser.parse_args()
    crop_images(args.demo, FIXTURE)
    weights = args.weights if args.weights is not None else overfit(FIXTURE, args.overfit)
    slim = save_weights(weights, FIXTURE)
    names = list(slim["names"])
    with tempfile.TemporaryDirectory() as scratch:
        scratch_dir = Path(scratch)
        data = data_yaml(FIXTURE, names, scratch_dir / "data.yaml")
        runner_args = {"weights": str(FIXTURE / "weights.pt"), "cfg": str(args.official / args.cfg),
                       "nc": len(names), "names": names, "official_weights": str(scratch_dir / "official.pt"),
                       "data": str(data), "batch": args.batch, "imgsz": args.imgsz,
                       "project": str(scratch_dir / "runs")}
        done = subprocess.run([args.official_python, "-c", _OFFICIAL_RUNNER, str(args.official),
                               json.dumps(runner_args)], cwd=args.official, capture_output=True, text=True,
                              env={**os.environ, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"})
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        if done.returncode:
            return done.returncode
        line = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULTS ")][-1]
        p, r, map50, map5095 = json.loads(line[len("RESULTS "):])
    expected = {
        "P": p, "R": r, "mAP50": map50, "mAP50-95": map5095,
        "imgsz": args.imgsz, "batch": args.batch, "conf": 0.001, "iou": 0.7, "max_det": 300,
        "official_model": args.cfg, "tolerance": 0.002,
        "command": (f"python val.py --data data.yaml --weights official.pt --img {args.imgsz} "
                    f"--batch {args.batch} --device cpu --workers 0 (official YOLOv9 repository; official.pt "
                    "= weights.pt loaded strictly into models.yolo.DetectionModel and pickled half)"),
        "note": "made by bench/make_val_parity_fixture.py; data.yaml points val at images/",
    }
    (FIXTURE / "expected.json").write_text(json.dumps(expected, indent=2) + "\n")
    print(json.dumps(expected, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
