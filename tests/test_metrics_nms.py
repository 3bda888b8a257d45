"""non_max_suppression and the letterbox mapping back to original-image pixels."""

from __future__ import annotations

import pytest
import torch

from yolotui.engine.evaluate.postprocess import (
    clip_boxes,
    letterbox_ratio_pad,
    non_max_suppression,
    scale_boxes,
)

torch.set_num_threads(1)


def decoded(rows: list[tuple], nc: int = 3) -> torch.Tensor:
    """A [1, 4 + nc, A] prediction from rows (cx, cy, w, h, cls, prob)."""
    pred = torch.zeros(1, 4 + nc, len(rows))
    for a, (cx, cy, w, h, cls, prob) in enumerate(rows):
        pred[0, :4, a] = torch.tensor([cx, cy, w, h])
        pred[0, 4 + cls, a] = prob
    return pred


def test_duplicates_are_removed_and_the_best_kept():
    pred = decoded([(50, 50, 20, 20, 0, 0.9), (51, 50, 20, 20, 0, 0.8), (50, 51, 20, 20, 0, 0.7),
                    (150, 150, 20, 20, 0, 0.6)])
    (det,) = non_max_suppression(pred, conf_thres=0.25, iou_thres=0.5)
    assert det.shape == (2, 6)
    assert torch.allclose(det[0], torch.tensor([40.0, 40.0, 60.0, 60.0, 0.9, 0.0]))
    assert det[1, 4] == pytest.approx(0.6)


def test_overlapping_boxes_of_different_classes_survive_unless_agnostic():
    pred = decoded([(50, 50, 20, 20, 0, 0.9), (50, 50, 20, 20, 1, 0.8)])
    (det,) = non_max_suppression(pred, conf_thres=0.25, iou_thres=0.5)
    assert sorted(det[:, 5].tolist()) == [0.0, 1.0]
    (det,) = non_max_suppression(pred, conf_thres=0.25, iou_thres=0.5, agnostic=True)
    assert det[:, 5].tolist() == [0.0]


def test_confidence_threshold_class_filter_and_max_det():
    rows = [(20 * i + 10, 10, 8, 8, i % 3, 0.1 + 0.08 * i) for i in range(10)]
    pred = decoded(rows)
    (det,) = non_max_suppression(pred, conf_thres=0.55)
    assert (det[:, 4] > 0.55).all() and len(det) == 4  # 0.58 .. 0.82
    (det,) = non_max_suppression(pred, conf_thres=0.0, classes=[1])
    assert (det[:, 5] == 1).all() and len(det) == 3
    (det,) = non_max_suppression(pred, conf_thres=0.0, max_det=4)
    assert len(det) == 4 and torch.all(det[:-1, 4] >= det[1:, 4])


def test_multi_label_keeps_each_class_over_threshold():
    pred = decoded([(50, 50, 20, 20, 0, 0.9)])
    pred[0, 4 + 2, 0] = 0.6
    (single,) = non_max_suppression(pred, conf_thres=0.5)
    (multi,) = non_max_suppression(pred, conf_thres=0.5, multi_label=True)
    assert len(single) == 1 and sorted(multi[:, 5].tolist()) == [0.0, 2.0]


def test_batches_empty_images_and_eval_pairs():
    pred = torch.cat((decoded([(50, 50, 20, 20, 0, 0.9)]), decoded([(50, 50, 20, 20, 0, 0.01)])))
    out = non_max_suppression((pred, [torch.zeros(1)]), conf_thres=0.25)
    assert len(out) == 2 and out[0].shape == (1, 6) and out[1].shape == (0, 6)
    # an official-style list of decoded branches: the last (main) one is used
    out = non_max_suppression([torch.zeros_like(pred), pred], conf_thres=0.25)
    assert out[0].shape == (1, 6)


def test_scale_boxes_undoes_the_letterbox():
    original = (300, 500)  # h, w
    letterboxed = (320, 320)
    ratio_pad = letterbox_ratio_pad(letterboxed, original)
    (ratio_h, ratio_w), (pad_w, pad_h) = ratio_pad
    assert ratio_h == ratio_w == pytest.approx(0.64) and pad_w == 0 and pad_h == pytest.approx(64.0)
    box = torch.tensor([[100.0, 50.0, 400.0, 250.0]])
    in_letterbox = box.clone()
    in_letterbox[:, [0, 2]] = in_letterbox[:, [0, 2]] * ratio_w + pad_w
    in_letterbox[:, [1, 3]] = in_letterbox[:, [1, 3]] * ratio_h + pad_h
    assert torch.allclose(scale_boxes(letterboxed, in_letterbox.clone(), original, ratio_pad), box, atol=1e-4)
    assert torch.allclose(scale_boxes(letterboxed, in_letterbox.clone(), original), box, atol=1e-4)
    # separate x and y ratios, as the loader records for a stretched resize
    stretched = scale_boxes((320, 320), torch.tensor([[64.0, 32.0, 128.0, 64.0]]), (160, 640),
                            ((2.0, 0.5), (0.0, 0.0)))
    assert torch.allclose(stretched, torch.tensor([[128.0, 16.0, 256.0, 32.0]]))


def test_clip_boxes():
    boxes = torch.tensor([[-5.0, -5.0, 700.0, 20.0]])
    assert clip_boxes(boxes, (100, 640)).tolist() == [[0.0, 0.0, 640.0, 20.0]]
