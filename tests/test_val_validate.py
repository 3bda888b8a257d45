"""validate(): a fake model over dict batches; metrics in original pixels, losses, COCO JSON vs pycocotools."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest
import torch
from torch import nn

from yolotui.engine.evaluate.validate import ValResult, validate
from yolotui.engine.loss.yolo_loss import YoloLoss

torch.set_num_threads(1)

NC = 2
REG_MAX = 16
STRIDES = (8, 16, 32)
SIZE = 64  # letterboxed input


class ReplayModel(nn.Module):
    """Returns prepared eval outputs batch after batch: (decoded [B, 4+nc, A], maps)."""

    def __init__(self, decoded: list[torch.Tensor]) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1))
        self.decoded = decoded
        self.calls = 0
        self.seen_training: list[bool] = []
        self.seen_range: list[tuple[float, float]] = []

    def forward(self, images: torch.Tensor):
        self.seen_training.append(self.training)
        self.seen_range.append((float(images.min()), float(images.max())))
        decoded = self.decoded[self.calls]
        self.calls += 1
        batch = images.shape[0]
        gen = torch.Generator().manual_seed(self.calls)
        maps = [torch.randn(batch, 4 * REG_MAX + NC, SIZE // s, SIZE // s, generator=gen) for s in STRIDES]
        return decoded, maps


def letterbox_meta(h0: int, w0: int):
    ratio = min(SIZE / h0, SIZE / w0)
    pad_w, pad_h = (SIZE - round(w0 * ratio)) / 2, (SIZE - round(h0 * ratio)) / 2
    return ratio, ((ratio, ratio), (pad_w, pad_h))


def make_batch(originals: list[tuple[int, int, list[list[float]]]], noise: float = 0.0, seed: int = 0,
               extra_false_positive: bool = False):
    """A loader batch plus the decoded prediction an almost-perfect model would give.

    originals: per image (h0, w0, boxes [[cls, x1, y1, x2, y2] in original pixels]).
    """
    rng = np.random.default_rng(seed)
    anchors = 84
    decoded = torch.zeros(len(originals), 4 + NC, anchors)
    targets, shapes, ratio_pads = [], [], []
    for i, (h0, w0, boxes) in enumerate(originals):
        ratio, ratio_pad = letterbox_meta(h0, w0)
        (_, _), (pad_w, pad_h) = ratio_pad
        shapes.append((h0, w0))
        ratio_pads.append(ratio_pad)
        for a, (cls, x1, y1, x2, y2) in enumerate(boxes):
            lx1, ly1, lx2, ly2 = x1 * ratio + pad_w, y1 * ratio + pad_h, x2 * ratio + pad_w, y2 * ratio + pad_h
            targets.append([i, cls, (lx1 + lx2) / 2 / SIZE, (ly1 + ly2) / 2 / SIZE, (lx2 - lx1) / SIZE,
                            (ly2 - ly1) / SIZE])
            jitter = rng.normal(0, noise, 4) * (lx2 - lx1)
            decoded[i, :4, a] = torch.tensor([(lx1 + lx2) / 2 + jitter[0], (ly1 + ly2) / 2 + jitter[1],
                                              (lx2 - lx1) + jitter[2], (ly2 - ly1) + jitter[3]])
            decoded[i, 4 + int(cls), a] = 0.5 + 0.4 * rng.random()
        if extra_false_positive:
            decoded[i, :4, anchors - 1] = torch.tensor([5.0, 5.0, 6.0, 6.0])
            decoded[i, 4, anchors - 1] = 0.95
    batch = {
        "img": torch.randint(0, 256, (len(originals), 3, SIZE, SIZE), dtype=torch.uint8),
        "targets": torch.tensor(targets, dtype=torch.float32).reshape(-1, 6),
        "paths": [f"/data/images/img{seed}_{i}.jpg" for i in range(len(originals))],
        "ori_shapes": shapes,
        "ratio_pad": ratio_pads,
        "indices": list(range(len(originals))),
    }
    return batch, decoded


ORIGINALS_A = [(120, 200, [[0, 20, 30, 80, 100], [1, 100, 10, 190, 60]]), (300, 150, [[1, 10, 50, 140, 250]])]
ORIGINALS_B = [(64, 64, []), (200, 100, [[0, 5, 5, 60, 90], [0, 40, 100, 95, 190]])]


def test_perfect_predictions_score_one_and_the_model_mode_is_restored():
    batch_a, decoded_a = make_batch(ORIGINALS_A)
    batch_b, decoded_b = make_batch(ORIGINALS_B, seed=1)
    model = ReplayModel([decoded_a, decoded_b]).train()
    done = []
    result = validate(model, [batch_a, batch_b], "cpu", NC, ["cat", "dog"], progress=lambda i, n: done.append(i),
                      coco_metrics=True)
    assert isinstance(result, ValResult)
    assert result.map50 == pytest.approx(1.0) and result.map == pytest.approx(1.0, abs=1e-3)
    assert result.precision == pytest.approx(1.0) and result.recall == pytest.approx(1.0)
    assert result.images == 4 and result.instances == 5
    assert result.losses is None and result.predictions_json is None
    assert model.seen_training == [False, False] and model.training  # eval during, restored after
    assert all(0.0 <= lo and hi <= 1.0 for lo, hi in model.seen_range)  # uint8 scaled to [0, 1]
    assert done == [1, 2]
    assert {row["name"] for row in result.per_class} == {"cat", "dog"}
    assert result.metrics() == {"P": result.precision, "R": result.recall, "mAP50": result.map50,
                                "mAP50-95": result.map}
    # the official maths (the default) integrates to the sentinel at recall 1, so perfect scores 0.995
    official = validate(ReplayModel([decoded_a, decoded_b]), [batch_a, batch_b], "cpu", NC, ["cat", "dog"])
    assert official.map50 == pytest.approx(0.995) and official.recall == pytest.approx(1.0)


def test_losses_are_averaged_when_a_loss_function_is_given():
    batch_a, decoded_a = make_batch(ORIGINALS_A)
    model = ReplayModel([decoded_a])
    result = validate(model, [batch_a], "cpu", NC, ["cat", "dog"], loss_fn=YoloLoss(NC, STRIDES))
    assert result.losses is not None and len(result.losses) == 3
    assert all(np.isfinite(result.losses)) and result.losses[1] > 0
    assert set(result.to_dict()["losses"]) == {"box", "cls", "dfl"}


def test_false_positives_lower_precision():
    batch_a, decoded_a = make_batch(ORIGINALS_A, extra_false_positive=True)
    result = validate(ReplayModel([decoded_a]), [batch_a], "cpu", NC, ["cat", "dog"])
    assert result.map50 < 1.0


def test_coco_json_is_in_original_pixels_and_agrees_with_pycocotools(tmp_path):
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    rng = np.random.default_rng(3)
    batches, decoded = [], []
    for seed in range(4):
        originals = []
        for _ in range(3):
            h0, w0 = int(rng.integers(80, 300)), int(rng.integers(80, 300))
            boxes = []
            for _ in range(int(rng.integers(0, 5))):
                x1, y1 = rng.uniform(0, w0 * 0.6), rng.uniform(0, h0 * 0.6)
                boxes.append([int(rng.integers(0, NC)), x1, y1, x1 + rng.uniform(8, w0 * 0.4),
                              y1 + rng.uniform(8, h0 * 0.4)])
            originals.append((h0, w0, boxes))
        batch, dec = make_batch(originals, noise=0.08, seed=seed, extra_false_positive=seed % 2 == 0)
        batches.append(batch)
        decoded.append(dec)
    result = validate(ReplayModel(decoded), batches, "cpu", NC, ["cat", "dog"], save_json_dir=tmp_path / "val",
                      coco_metrics=True)
    assert result.predictions_json == tmp_path / "val" / "predictions.json"
    assert result.ground_truth_json == tmp_path / "val" / "ground-truth.json"

    ground_truth = json.loads(result.ground_truth_json.read_text())
    assert len(ground_truth["images"]) == 12
    assert [c["name"] for c in ground_truth["categories"]] == ["cat", "dog"]
    first_image = ground_truth["images"][0]
    assert first_image["file_name"] == "img0_0.jpg"
    assert (first_image["height"], first_image["width"]) == tuple(batches[0]["ori_shapes"][0])

    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO(str(result.ground_truth_json))
        coco_dt = coco_gt.loadRes(str(result.predictions_json))
        evaluator = COCOeval(coco_gt, coco_dt, "bbox")
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    assert 0.2 < evaluator.stats[1] <= 1.0
    assert result.map50 == pytest.approx(evaluator.stats[1], abs=0.005)
    assert result.map == pytest.approx(evaluator.stats[0], abs=0.005)


def test_ground_truth_json_boxes_match_the_original_labels(tmp_path):
    batch, decoded = make_batch([(120, 200, [[1, 20, 30, 80, 100]])])
    result = validate(ReplayModel([decoded]), [batch], "cpu", NC, ["cat", "dog"], save_json_dir=tmp_path)
    ground_truth = json.loads(result.ground_truth_json.read_text())
    (annotation,) = ground_truth["annotations"]
    assert annotation["category_id"] == 1
    assert annotation["bbox"] == pytest.approx([20, 30, 60, 70], abs=1e-3)
    predictions = json.loads(result.predictions_json.read_text())
    assert predictions[0]["bbox"] == pytest.approx([20, 30, 60, 70], abs=1e-2)
    assert predictions[0]["image_id"] == ground_truth["images"][0]["id"]
