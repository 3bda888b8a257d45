"""`yolotui val --save-json` end to end: a tiny checkpoint on a tiny generated set, checked against pycocotools.

An untrained model scores nothing, so the labels are made from the model's own detections instead:
a first validation pass writes predictions.json, its best boxes (slightly moved, some dropped, one extra
box per image) become the ground truth, and a second pass, the one under test, must then find a clear
but imperfect mAP, computed identically by yolotui and by pycocotools from the files it wrote.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from yolotui.cli import main
from yolotui.datasets import make_demo_dataset
from yolotui.engine.model import build_model, narrow_config
from yolotui.engine.model.builder import load_model_yaml

torch.set_num_threads(1)
IMG = 96


def tiny_checkpoint(path: Path, nc: int, names: list[str]) -> None:
    """A narrow gelan-t whose head biases give varied class scores and boxes of a few grid cells."""
    torch.manual_seed(0)
    cfg, _ = load_model_yaml("gelan-t")
    model = build_model(narrow_config(cfg, 0.25), nc=nc)
    state = model.state_dict()
    head = len(model.model) - 1
    bins = torch.arange(16, dtype=torch.float32)
    for level in range(3):
        state[f"model.{head}.cv2.{level}.2.bias"] = (-0.5 * (bins - 2.0) ** 2).repeat(4)
        state[f"model.{head}.cv3.{level}.2.bias"] = torch.zeros(nc)
    torch.save({"format": "yolotui-1", "model_yaml": model.yaml, "nc": nc, "names": names, "epoch": 1,
                "epochs": 1, "step": 0, "model": state, "ema": state, "best_fitness": 0.0}, path)


def relabel_from_predictions(data_root: Path, predictions_json: Path, ground_truth_json: Path, seed: int = 0):
    """Rewrite the val labels from the best predictions per image; returns the number of boxes written."""
    rng = np.random.default_rng(seed)
    images = {im["id"]: im for im in json.loads(ground_truth_json.read_text())["images"]}
    by_image: dict[int, list[dict]] = {}
    for p in json.loads(predictions_json.read_text()):
        by_image.setdefault(p["image_id"], []).append(p)
    written = 0
    for image_id, image in images.items():
        width, height = image["width"], image["height"]
        best = sorted(by_image.get(image_id, []), key=lambda p: -p["score"])[:6]
        lines = []
        for rank, p in enumerate(best):
            if rank == 3:
                continue  # a box the model misses at that rank order
            x, y, w, h = p["bbox"]
            if w < 4 or h < 4:
                continue
            dx, dy = rng.normal(0, 0.08 * w), rng.normal(0, 0.08 * h)
            cx = min(max((x + w / 2 + dx) / width, 0.05), 0.95)
            cy = min(max((y + h / 2 + dy) / height, 0.05), 0.95)
            nw, nh = min(w / width, 2 * min(cx, 1 - cx)), min(h / height, 2 * min(cy, 1 - cy))
            lines.append(f"{p['category_id']} {cx:.6f} {cy:.6f} {nw:.6f} {nh:.6f}")
        lines.append("0 0.9 0.9 0.1 0.1")  # an object nothing detects
        label = data_root / "labels" / "val" / (Path(image["file_name"]).stem + ".txt")
        label.write_text("\n".join(lines) + "\n")
        written += len(lines)
    for cache in data_root.rglob("*.cache*"):
        cache.unlink()
    return written


def pycocotools_map(predictions_json: str, ground_truth_json: str) -> tuple[float, float]:
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO(ground_truth_json)
        evaluator = COCOeval(coco_gt, coco_gt.loadRes(predictions_json), "bbox")
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    return float(evaluator.stats[1]), float(evaluator.stats[0])


def test_val_save_json_agrees_with_pycocotools(tmp_path, cli_env, yolotui_cmd, capsys):
    data_yaml = make_demo_dataset(tmp_path / "demo", n_train=1, n_val=6, img=IMG, seed=1)
    names = ["circle", "square", "triangle", "diamond", "cross"]
    weights = tmp_path / "tiny.pt"
    tiny_checkpoint(weights, 5, names)
    common = ["--weights", str(weights), "--data", str(data_yaml), "--img", str(IMG), "--device", "cpu",
              "--workers", "0", "--save-json", "--project", str(tmp_path / "runs")]

    # pass 1, in process: the model's own detections become the labels
    assert main(["val", *common, "--name", "labels"]) == 0
    capsys.readouterr()
    first = tmp_path / "runs" / "labels"
    assert relabel_from_predictions(tmp_path / "demo", first / "predictions.json", first / "ground-truth.json") > 6

    # pass 2, the real command line
    env = {**cli_env, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([*yolotui_cmd, "val", *common, "--name", "exp", "--json"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["run_dir"] == str(tmp_path / "runs" / "exp")
    assert Path(report["predictions_json"]).is_file() and Path(report["ground_truth_json"]).is_file()
    assert report["images"] == 6 and report["instances"] > 6
    assert {row["name"] for row in report["per_class"]} <= set(names)
    coco50, coco = pycocotools_map(report["predictions_json"], report["ground_truth_json"])
    assert 0.1 < coco50 < 0.99, coco50  # a real, imperfect result
    assert report["mAP50"] == pytest.approx(coco50, abs=0.005)
    assert report["mAP50-95"] == pytest.approx(coco, abs=0.005)
    assert report["fitness"] == pytest.approx(0.1 * report["mAP50"] + 0.9 * report["mAP50-95"])

    # the table form (in process, to save a torch start) prints the COCO files of a new, numbered run folder
    assert main(["val", *common, "--name", "exp"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.split()[:1] == ["all"] for line in lines)
    assert f"predictions: {tmp_path / 'runs' / 'exp2' / 'predictions.json'}" in lines
    assert f"ground truth: {tmp_path / 'runs' / 'exp2' / 'ground-truth.json'}" in lines
    assert os.path.isfile(tmp_path / "runs" / "exp2" / "ground-truth.json")


def test_class_count_mismatch_is_refused(tmp_path, capsys):
    data_yaml = make_demo_dataset(tmp_path / "demo", n_train=1, n_val=1, img=64)
    weights = tmp_path / "three.pt"
    tiny_checkpoint(weights, 3, ["a", "b", "c"])
    code = main(["val", "--weights", str(weights), "--data", str(data_yaml), "--device", "cpu", "--img", "64"])
    err = capsys.readouterr().err
    assert code == 2 and "predicts 3 classes" in err and "nc=5" in err
