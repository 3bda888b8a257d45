"""Boxes follow every augmentation: a known green rectangle is drawn, augmented, and each output box
is compared with the green pixels inside it (IoU >= 0.9), for mosaic, affine, flips and letterbox."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from yolotui.engine.data import AUGMENT_DEFAULTS, YoloDataset, letterbox

torch.set_num_threads(1)

OFF = {k: 0.0 for k in AUGMENT_DEFAULTS}
IMGSZ = 160
H0, W0 = 120, 160  # not square: the letterbox pads top and bottom
RECT = (40, 30, 120, 90)  # x1, y1, x2, y2 in pixels (x2, y2 exclusive)


@pytest.fixture(scope="module")
def shape_items(tmp_path_factory) -> list[tuple[str, np.ndarray]]:
    folder = tmp_path_factory.mktemp("shapes")
    items = []
    for i, offset in enumerate((0, 12)):
        img = np.full((H0, W0, 3), (90, 30, 60), np.uint8)
        x1, y1, x2, y2 = RECT[0] + offset, RECT[1], RECT[2] + offset, RECT[3]
        img[y1:y2, x1:x2] = (0, 255, 0)
        path = folder / f"shape{i}.png"
        cv2.imwrite(str(path), img)
        label = np.array([[0, (x1 + x2) / 2 / W0, (y1 + y2) / 2 / H0, (x2 - x1) / W0, (y2 - y1) / H0]], np.float32)
        items.append((str(path), label))
    return items


def _green_mask(img_chw: torch.Tensor) -> np.ndarray:
    r, g, b = (img_chw[c].numpy().astype(int) for c in range(3))
    return (g > 128) & (r < 128) & (b < 128)


def _iou(a, b) -> float:
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def _check_boxes_follow_pixels(sample, min_side: float = 8.0) -> int:
    """Every (large enough) box matches the green pixels around it; returns how many were checked."""
    img, labels = sample[0], sample[1].numpy()
    mask = _green_mask(img)
    size_h, size_w = mask.shape
    checked = 0
    for _cls, cx, cy, w, h in labels:
        box = ((cx - w / 2) * size_w, (cy - h / 2) * size_h, (cx + w / 2) * size_w, (cy + h / 2) * size_h)
        if box[2] - box[0] < min_side or box[3] - box[1] < min_side:
            continue
        x1, y1 = max(int(box[0]) - 3, 0), max(int(box[1]) - 3, 0)
        x2, y2 = int(np.ceil(box[2])) + 3, int(np.ceil(box[3])) + 3
        ys, xs = np.nonzero(mask[y1:y2, x1:x2])
        assert len(xs), f"no shape pixels under box {box}"
        pixels = (xs.min() + x1, ys.min() + y1, xs.max() + x1 + 1, ys.max() + y1 + 1)
        assert _iou(box, pixels) >= 0.9, (box, pixels)
        checked += 1
    return checked


def _run(items, hyp, augment=True, epochs=4, mosaic=True) -> int:
    ds = YoloDataset(items, imgsz=IMGSZ, augment=augment, hyp={**OFF, **hyp}, seed=11)
    checked = 0
    for epoch in range(epochs):
        ds.set_epoch(epoch, mosaic)
        for i in range(len(ds)):
            sample = ds[i]
            assert sample[0].shape == (3, IMGSZ, IMGSZ) and sample[0].dtype == torch.uint8
            checked += _check_boxes_follow_pixels(sample)
    return checked


def test_mosaic(shape_items):
    assert _run(shape_items, {"mosaic": 1.0, "translate": 0.1, "scale": 0.3}) >= 8


def test_affine_rotation_shear_scale_translate(shape_items):
    hyp = {"degrees": 20.0, "shear": 5.0, "scale": 0.3, "translate": 0.1}
    assert _run(shape_items, hyp, mosaic=False) >= 6


def test_perspective(shape_items):
    assert _run(shape_items, {"perspective": 0.0005, "scale": 0.2}, mosaic=False) >= 6


def test_flips(shape_items):
    ds = YoloDataset(shape_items, imgsz=IMGSZ, augment=True, hyp={**OFF, "fliplr": 1.0, "flipud": 1.0}, seed=0)
    plain = YoloDataset(shape_items, imgsz=IMGSZ, augment=True, hyp=OFF, seed=0)
    flipped, original = ds[1], plain[1]
    assert torch.equal(flipped[0], original[0].flip(1).flip(2))
    np.testing.assert_allclose(flipped[1][:, 1:3].numpy(), 1 - original[1][:, 1:3].numpy(), atol=1e-6)
    assert _check_boxes_follow_pixels(flipped) == 1


def test_letterbox_validation(shape_items):
    ds = YoloDataset(shape_items, imgsz=IMGSZ, augment=False, hyp=None, seed=0)
    img, labels, path, shape0, ratio_pad, index = ds[0]
    assert shape0 == (H0, W0) and index == 0 and path == shape_items[0][0]
    (ratio_h, ratio_w), (pad_w, pad_h) = ratio_pad
    assert ratio_h == pytest.approx(1.0) and ratio_w == pytest.approx(1.0) and (pad_w, pad_h) == (0, 20)
    assert (img[:, :20] == 114).all() and (img[:, -20:] == 114).all()
    assert _check_boxes_follow_pixels(ds[0]) == 1 and _check_boxes_follow_pixels(ds[1]) == 1
    small = YoloDataset(shape_items, imgsz=96, augment=False, seed=0)
    assert _check_boxes_follow_pixels(small[0]) == 1
    (ratio_h, ratio_w), (pad_w, pad_h) = small[0][4]
    assert ratio_h == pytest.approx(0.6) and ratio_w == pytest.approx(0.6) and (pad_w, pad_h) == (0, 12)


def test_letterbox_function_pads_to_square():
    im = np.zeros((30, 50, 3), np.uint8)
    out, ratio, pad = letterbox(im, 64)
    assert out.shape == (64, 64, 3) and ratio == pytest.approx(64 / 50) and pad[0] == 0


def test_hsv_changes_colour_not_boxes(shape_items):
    plain = YoloDataset(shape_items, imgsz=IMGSZ, augment=True, hyp=OFF, seed=5)
    coloured = YoloDataset(shape_items, imgsz=IMGSZ, augment=True, hyp={**OFF, "hsv_h": 0.015, "hsv_s": 0.7,
                                                                         "hsv_v": 0.4}, seed=5)
    a, b = plain[0], coloured[0]
    assert not torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_mixup_keeps_both_label_sets(shape_items):
    ds = YoloDataset(shape_items, imgsz=IMGSZ, augment=True, hyp={**OFF, "mosaic": 1.0, "mixup": 1.0}, seed=2)
    no_mix = YoloDataset(shape_items, imgsz=IMGSZ, augment=True, hyp={**OFF, "mosaic": 1.0}, seed=2)
    assert len(ds[0][1]) > len(no_mix[0][1])
    assert ds[0][4] is None  # a mosaic has no single letterbox ratio


def test_close_mosaic_equals_mosaic_probability_zero(shape_items):
    hyp = {**AUGMENT_DEFAULTS, "degrees": 5.0}
    closed = YoloDataset(shape_items, imgsz=IMGSZ, augment=True, hyp=hyp, seed=4)
    closed.set_epoch(7, mosaic=False)
    never = YoloDataset(shape_items, imgsz=IMGSZ, augment=True, hyp={**hyp, "mosaic": 0.0}, seed=4)
    never.set_epoch(7, mosaic=True)
    with_mosaic = YoloDataset(shape_items, imgsz=IMGSZ, augment=True, hyp=hyp, seed=4)
    with_mosaic.set_epoch(7, mosaic=True)
    for i in range(2):
        assert torch.equal(closed[i][0], never[i][0]) and torch.equal(closed[i][1], never[i][1])
        assert closed[i][4] is not None and with_mosaic[i][4] is None


def test_ram_cache_gives_identical_samples(shape_items):
    disk = YoloDataset(shape_items, imgsz=IMGSZ, augment=True, hyp=AUGMENT_DEFAULTS, seed=9)
    ram = YoloDataset(shape_items, imgsz=IMGSZ, augment=True, hyp=AUGMENT_DEFAULTS, seed=9, cache="ram")
    for epoch in (0, 3):
        disk.set_epoch(epoch)
        ram.set_epoch(epoch)
        for i in range(2):
            assert torch.equal(disk[i][0], ram[i][0]) and torch.equal(disk[i][1], ram[i][1])
            assert disk[i][3] == ram[i][3] == (H0, W0)


def test_image_size_must_fit_stride(shape_items):
    from yolotui.errors import UserError

    with pytest.raises(UserError, match="multiple of the model stride 32"):
        YoloDataset(shape_items, imgsz=100)
    assert Path(shape_items[0][0]).exists()
