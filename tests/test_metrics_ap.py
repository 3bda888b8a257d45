"""COCO-style metrics: hand-made cases with known AP, and agreement with pycocotools on synthetic data."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
import torch

from yolotui.engine.evaluate.coco_json import CocoJsonCollector
from yolotui.engine.evaluate.metrics import (
    IOU_THRESHOLDS,
    DetectionMetrics,
    coco_average_precision,
    fitness,
    match_detections,
)


def gt(*rows):
    return np.array(rows, dtype=np.float64).reshape(-1, 5)


def dets(*rows):
    return np.array(rows, dtype=np.float64).reshape(-1, 6)


def test_perfect_predictions_score_one():
    m = DetectionMetrics(2, names=["cat", "dog"])
    m.update(dets([10, 10, 50, 50, 0.9, 0], [60, 60, 90, 95, 0.8, 1]), gt([0, 10, 10, 50, 50], [1, 60, 60, 90, 95]))
    m.update(torch.tensor([[0.0, 0.0, 20.0, 30.0, 0.7, 1.0]]), torch.tensor([[1.0, 0.0, 0.0, 20.0, 30.0]]))
    r = m.compute()
    assert r["mAP50"] == pytest.approx(1.0) and r["mAP50-95"] == pytest.approx(1.0)
    assert r["precision"] == pytest.approx(1.0) and r["recall"] == pytest.approx(1.0)
    assert r["fitness"] == pytest.approx(1.0)
    assert r["images"] == 2 and r["instances"] == 3
    rows = {row["name"]: row for row in r["per_class"]}
    assert rows["cat"]["images"] == 1 and rows["dog"]["images"] == 2 and rows["dog"]["instances"] == 2


def test_a_shifted_box_below_iou_half_scores_zero():
    m = DetectionMetrics(1)
    m.update(dets([40, 0, 140, 100, 0.9, 0]), gt([0, 0, 0, 100, 100]))  # IoU = 60/140 = 0.43
    r = m.compute()
    assert r["mAP50"] == 0.0 and r["mAP50-95"] == 0.0 and r["recall"] == 0.0


def test_iou_072_counts_at_five_of_ten_thresholds():
    m = DetectionMetrics(1)
    m.update(dets([0, 0, 100, 72, 0.9, 0]), gt([0, 0, 0, 100, 100]))
    r = m.compute()
    assert r["mAP50"] == pytest.approx(1.0)
    assert r["mAP50-95"] == pytest.approx(0.5)  # matched at 0.50 .. 0.70, missed at 0.75 .. 0.95


def test_a_confident_false_positive_halves_precision():
    m = DetectionMetrics(1)
    m.update(dets([200, 200, 260, 260, 0.95, 0], [0, 0, 100, 100, 0.5, 0]), gt([0, 0, 0, 100, 100]))
    assert m.compute()["mAP50"] == pytest.approx(0.5)


def test_half_recall_covers_51_of_101_points():
    m = DetectionMetrics(1)
    m.update(dets([0, 0, 100, 100, 0.9, 0]), gt([0, 0, 0, 100, 100], [0, 200, 200, 300, 300]))
    assert m.compute()["mAP50"] == pytest.approx(51 / 101)


def test_a_duplicate_detection_is_a_false_positive():
    order, tp = match_detections(np.array([[0, 0, 100, 100], [5, 5, 100, 100]]), np.array([0.6, 0.9]),
                                 np.array([[0, 0, 100, 100]]))
    assert order.tolist() == [1, 0]  # best score first
    assert tp[:, 0].tolist() == [True, False]
    # at 0.95 only the exact box matches: the better-scored one misses and leaves the gt to the other
    assert tp[:, -1].tolist() == [False, True]


def test_wrong_class_misses_and_classes_without_ground_truth_do_not_count():
    m = DetectionMetrics(3)
    m.update(dets([0, 0, 100, 100, 0.9, 1], [200, 200, 300, 300, 0.8, 0], [400, 0, 450, 50, 0.7, 2]),
             gt([0, 0, 0, 100, 100], [0, 200, 200, 300, 300]))
    r = m.compute()
    # class 0: one of two found (51/101); class 1 and 2 have no ground truth and are left out
    assert r["mAP50"] == pytest.approx(51 / 101)
    assert [row["class"] for row in r["per_class"]] == [0]


def test_detections_on_an_empty_image_are_false_positives():
    m = DetectionMetrics(1)
    m.update(dets([0, 0, 100, 100, 0.5, 0]), gt([0, 0, 0, 100, 100]))
    m.update(dets([0, 0, 100, 100, 0.9, 0]), gt())
    assert m.compute()["mAP50"] == pytest.approx(0.5)


def test_no_ground_truth_at_all_gives_zero():
    m = DetectionMetrics(2)
    m.update(dets([0, 0, 10, 10, 0.9, 0]), gt())
    r = m.compute()
    assert r["mAP50"] == 0.0 and r["mAP50-95"] == 0.0 and r["per_class"] == []


def test_only_the_best_100_detections_per_image_and_class_count_as_in_coco():
    far = [[1000 + 3 * i, 1000, 1002 + 3 * i, 1002, 0.9 - i * 0.001, 0] for i in range(100)]
    boxes = dets(*far, [0, 0, 100, 100, 0.1, 0])
    truth = gt([0, 0, 0, 100, 100])
    coco_like = DetectionMetrics(1)
    coco_like.update(boxes, truth)
    assert coco_like.compute()["mAP50"] == 0.0
    unlimited = DetectionMetrics(1, max_det_per_class=None)
    unlimited.update(boxes, truth)
    assert unlimited.compute()["mAP50"] > 0.0


def test_coco_average_precision_edges():
    assert np.isnan(coco_average_precision(np.zeros(0, bool), 0))
    assert coco_average_precision(np.zeros(0, bool), 3) == 0.0
    assert coco_average_precision(np.array([True, True]), 2) == pytest.approx(1.0)


def test_fitness_weights():
    assert fitness({"mAP50": 0.5, "mAP50-95": 0.3}) == pytest.approx(0.05 + 0.27)
    assert len(IOU_THRESHOLDS) == 10 and IOU_THRESHOLDS[0] == 0.5 and IOU_THRESHOLDS[-1] == pytest.approx(0.95)


# ------------------------------------------------------------------------------------------------ pycocotools

def synthetic_set(seed: int, nc: int = 4, images: int = 30):
    """Images with random boxes; detections = noisy copies (some relabelled), duplicates and false positives."""
    rng = np.random.default_rng(seed)
    for _ in range(images):
        height, width = (int(v) for v in rng.integers(200, 500, 2))
        n = int(rng.integers(0, 8))
        xy = rng.uniform(0, [width * 0.7, height * 0.7], (n, 2))
        wh = rng.uniform(10, [width * 0.3, height * 0.3], (n, 2))
        truth = np.concatenate([rng.integers(0, nc, (n, 1)), xy, xy + wh], 1)
        found = []
        for row in truth:
            for _ in range(int(rng.integers(0, 3))):
                noise = rng.normal(0, 0.12 * (row[3:5] - row[1:3]).mean(), 4)
                cls = row[0] if rng.random() > 0.1 else rng.integers(0, nc)
                found.append([*(row[1:5] + noise), rng.uniform(0.05, 1), cls])
        for _ in range(int(rng.integers(0, 6))):
            xy0 = rng.uniform(0, [width * 0.7, height * 0.7])
            wh0 = rng.uniform(10, [width * 0.3, height * 0.3])
            found.append([*xy0, *(xy0 + wh0), rng.uniform(0, 0.8), rng.integers(0, nc)])
        found = np.array(found, dtype=np.float64).reshape(-1, 6)
        found[:, 2:4] = np.maximum(found[:, 2:4], found[:, 0:2] + 1)  # NMS output never has inverted boxes
        found[:, :4] = found[:, :4].round(3)  # as written to JSON
        found[:, 4] = found[:, 4].round(5)
        truth[:, 1:5] = truth[:, 1:5].round(3)
        yield height, width, truth, found


def pycocotools_map(predictions_json, ground_truth_json) -> tuple[float, float]:
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO(str(ground_truth_json))
        coco_dt = coco_gt.loadRes(str(predictions_json))
        evaluator = COCOeval(coco_gt, coco_dt, "bbox")
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    return float(evaluator.stats[1]), float(evaluator.stats[0])  # mAP50, mAP50-95 (area all, maxDets 100)


@pytest.mark.parametrize("seed", [0, 3, 11])
def test_agrees_with_pycocotools(tmp_path, seed):
    names = ["a", "b", "c", "d"]
    metrics = DetectionMetrics(4, names=names)
    collector = CocoJsonCollector(names)
    for i, (height, width, truth, found) in enumerate(synthetic_set(seed)):
        metrics.update(found, truth)
        image_id = collector.add_image(f"img{i}.jpg", height, width)
        collector.add_ground_truth(image_id, truth)
        collector.add_predictions(image_id, found)
    ours = metrics.compute()
    predictions_json, ground_truth_json = collector.write(tmp_path)
    coco50, coco = pycocotools_map(predictions_json, ground_truth_json)
    assert 0.1 < coco50 < 0.9  # a non-trivial case
    assert ours["mAP50"] == pytest.approx(coco50, abs=0.005)
    assert ours["mAP50-95"] == pytest.approx(coco, abs=0.005)


def test_agrees_with_pycocotools_past_100_detections_per_image(tmp_path):
    rng = np.random.default_rng(5)
    metrics = DetectionMetrics(1, names=["x"])
    collector = CocoJsonCollector(["x"])
    for i in range(3):
        truth = np.array([[0, 10 + 30 * k, 10, 30 + 30 * k, 40] for k in range(20)], dtype=np.float64)
        boxes = np.repeat(truth[:, 1:5], 8, axis=0) + rng.normal(0, 2.5, (160, 4))
        boxes[:, 2:4] = np.maximum(boxes[:, 2:4], boxes[:, :2] + 1)
        found = np.concatenate([boxes.round(3), rng.uniform(0, 1, (160, 1)).round(5), np.zeros((160, 1))], 1)
        metrics.update(found, truth)
        image_id = collector.add_image(f"img{i}.jpg", 100, 700)
        collector.add_ground_truth(image_id, truth)
        collector.add_predictions(image_id, found)
    predictions_json, ground_truth_json = collector.write(tmp_path)
    coco50, coco = pycocotools_map(predictions_json, ground_truth_json)
    ours = metrics.compute()
    assert ours["mAP50"] == pytest.approx(coco50, abs=0.005)
    assert ours["mAP50-95"] == pytest.approx(coco, abs=0.005)
