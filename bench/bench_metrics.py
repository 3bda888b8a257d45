"""mAP computation speed: yolotui's DetectionMetrics vs pycocotools' COCOeval on the same detections.

Builds a synthetic set (images with ground truth, up to 300 noisy detections each, many classes),
times DetectionMetrics (update + compute) and pycocotools (loadRes + evaluate + accumulate, from the
JSON yolotui writes), prints both and the ratio (pycocotools time / yolotui time; above 1 means yolotui
is faster) and the two mAP50-95 figures, which should agree within 0.005.
Usage: python bench/bench_metrics.py [--images 500] [--dets 300] [--classes 80]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from yolotui.engine.evaluate.coco_json import CocoJsonCollector  # noqa: E402
from yolotui.engine.evaluate.metrics import DetectionMetrics  # noqa: E402


def synthetic(images: int, dets: int, classes: int, seed: int = 0):
    """(height, width, ground truth [m, 5], detections [n, 6]) per image."""
    rng = np.random.default_rng(seed)
    for _ in range(images):
        count = int(rng.integers(1, 15))
        xy = rng.uniform(0, 500, (count, 2))
        truth = np.concatenate([rng.integers(0, classes, (count, 1)), xy, xy + rng.uniform(10, 150, (count, 2))], 1)
        pick = rng.integers(0, count, dets)
        boxes = truth[pick, 1:5] + rng.normal(0, 15, (dets, 4))
        boxes[:, 2:] = np.maximum(boxes[:, 2:], boxes[:, :2] + 1)
        cls = np.where(rng.random(dets) < 0.7, truth[pick, 0], rng.integers(0, classes, dets))
        found = np.concatenate([boxes.round(3), rng.random((dets, 1)).round(5), cls[:, None]], 1)
        truth[:, 1:5] = truth[:, 1:5].round(3)
        yield 700, 700, truth, found


def main() -> None:
    """Time both evaluators on one synthetic set and print the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=500)
    parser.add_argument("--dets", type=int, default=300)
    parser.add_argument("--classes", type=int, default=80)
    args = parser.parse_args()
    data = list(synthetic(args.images, args.dets, args.classes))
    names = [f"class{i}" for i in range(args.classes)]

    started = time.perf_counter()
    metrics = DetectionMetrics(args.classes, names)
    for _, _, truth, found in data:
        metrics.update(found, truth)
    ours = metrics.compute()
    ours_seconds = time.perf_counter() - started

    collector = CocoJsonCollector(names)
    for height, width, truth, found in data:
        image_id = collector.add_image(f"{len(collector.images)}.jpg", height, width)
        collector.add_ground_truth(image_id, truth)
        collector.add_predictions(image_id, found)
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with tempfile.TemporaryDirectory() as folder:
        predictions, ground_truth = collector.write(folder)
        with contextlib.redirect_stdout(io.StringIO()):
            started = time.perf_counter()
            coco_gt = COCO(str(ground_truth))
            evaluator = COCOeval(coco_gt, coco_gt.loadRes(str(predictions)), "bbox")
            evaluator.evaluate()
            evaluator.accumulate()
            evaluator.summarize()
            coco_seconds = time.perf_counter() - started
    print(f"{args.images} images, {args.dets} detections each, {args.classes} classes")
    print(f"yolotui DetectionMetrics: {ours_seconds:.2f} s   mAP50 {ours['mAP50']:.4f}  mAP50-95 {ours['mAP50-95']:.4f}")
    print(f"pycocotools COCOeval:     {coco_seconds:.2f} s   mAP50 {evaluator.stats[1]:.4f}  "
          f"mAP50-95 {evaluator.stats[0]:.4f}")
    print(f"ratio (pycocotools time / yolotui time): {coco_seconds / ours_seconds:.2f}")


if __name__ == "__main__":
    main()
