"""Image and box augmentations after the official YOLOv9 recipe, driven by an explicit numpy Generator.

Boxes here are pixel `[n, 5]` arrays (cls, x1, y1, x2, y2). No function touches global RNG state: the
caller passes the per-sample Generator, which is what makes a sample a pure function of its seed.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

PAD_VALUE = 114

# Augmentation keys of hyp.scratch-high.yaml and their official values (used when a key is absent).
AUGMENT_DEFAULTS = {
    "hsv_h": 0.015, "hsv_s": 0.7, "hsv_v": 0.4, "degrees": 0.0, "translate": 0.1, "scale": 0.9, "shear": 0.0,
    "perspective": 0.0, "flipud": 0.0, "fliplr": 0.5, "mosaic": 1.0, "mixup": 0.15,
}


def letterbox(im: np.ndarray, size: int | tuple[int, int], scaleup: bool = True,
              interpolation: int = cv2.INTER_LINEAR) -> tuple[np.ndarray, float, tuple[float, float]]:
    """Resize `im` to fit `size` (a square side, or (height, width)) keeping its aspect; pad the rest grey.

    Returns the image, the scale applied and the padding (left, top) in pixels (may be fractional /2).
    Rounding and padding are the official validator's (`auto=False`), so rectangular batches match it.
    """
    h, w = im.shape[:2]
    out_h, out_w = (size, size) if isinstance(size, (int, np.integer)) else (int(size[0]), int(size[1]))
    ratio = min(out_h / h, out_w / w)
    if not scaleup:
        ratio = min(ratio, 1.0)
    new_w, new_h = int(round(w * ratio)), int(round(h * ratio))
    pad_w, pad_h = (out_w - new_w) / 2, (out_h - new_h) / 2
    if (new_w, new_h) != (w, h):
        im = cv2.resize(im, (new_w, new_h), interpolation=interpolation)
    top, bottom = int(round(pad_h - 0.1)), int(round(pad_h + 0.1))
    left, right = int(round(pad_w - 0.1)), int(round(pad_w + 0.1))
    im = cv2.copyMakeBorder(im, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(PAD_VALUE,) * 3)
    return im, ratio, (pad_w, pad_h)


def xywhn_to_xyxy(labels: np.ndarray, w: float, h: float, pad_w: float = 0.0, pad_h: float = 0.0) -> np.ndarray:
    """Normalised (cls, cx, cy, w, h) rows to pixel (cls, x1, y1, x2, y2), scaled to w x h and shifted."""
    out = labels.astype(np.float64, copy=True)
    out[:, 1] = w * (labels[:, 1] - labels[:, 3] / 2) + pad_w
    out[:, 2] = h * (labels[:, 2] - labels[:, 4] / 2) + pad_h
    out[:, 3] = w * (labels[:, 1] + labels[:, 3] / 2) + pad_w
    out[:, 4] = h * (labels[:, 2] + labels[:, 4] / 2) + pad_h
    return out


def xyxy_to_xywhn(labels: np.ndarray, w: int, h: int, eps: float = 1e-3) -> np.ndarray:
    """Pixel (cls, x1, y1, x2, y2) rows, clipped to the image, to normalised (cls, cx, cy, w, h)."""
    out = labels.astype(np.float64, copy=True)
    x1 = labels[:, 1].clip(0, w - eps)
    y1 = labels[:, 2].clip(0, h - eps)
    x2 = labels[:, 3].clip(0, w - eps)
    y2 = labels[:, 4].clip(0, h - eps)
    out[:, 1], out[:, 2] = (x1 + x2) / 2 / w, (y1 + y2) / 2 / h
    out[:, 3], out[:, 4] = (x2 - x1) / w, (y2 - y1) / h
    return out


def box_candidates(before: np.ndarray, after: np.ndarray, wh_thr: float = 2, ar_thr: float = 100,
                   area_thr: float = 0.1, eps: float = 1e-16) -> np.ndarray:
    """Mask of boxes worth keeping after a warp: wider and taller than wh_thr px, not too thin, and at
    least area_thr of their (scaled) area before. Both arguments are [4, n] (x1, y1, x2, y2)."""
    w1, h1 = before[2] - before[0], before[3] - before[1]
    w2, h2 = after[2] - after[0], after[3] - after[1]
    aspect = np.maximum(w2 / (h2 + eps), h2 / (w2 + eps))
    return (w2 > wh_thr) & (h2 > wh_thr) & (w2 * h2 / (w1 * h1 + eps) > area_thr) & (aspect < ar_thr)


def random_affine(im: np.ndarray, labels: np.ndarray, rng: np.random.Generator, degrees: float = 0.0,
                  translate: float = 0.1, scale: float = 0.5, shear: float = 0.0, perspective: float = 0.0,
                  border: tuple[int, int] = (0, 0)) -> tuple[np.ndarray, np.ndarray]:
    """Random perspective / rotation / scale / shear / translation of an image and its pixel boxes.

    `border` (negative, per side) crops the output, as the mosaic's 2s canvas is cut back to s.
    Boxes are the bounds of their warped corners, clipped, and dropped when too small after the warp.
    """
    height = im.shape[0] + border[0] * 2
    width = im.shape[1] + border[1] * 2
    centre = np.eye(3)
    centre[0, 2], centre[1, 2] = -im.shape[1] / 2, -im.shape[0] / 2
    persp = np.eye(3)
    persp[2, 0], persp[2, 1] = rng.uniform(-perspective, perspective, 2)
    rot = np.eye(3)
    angle = rng.uniform(-degrees, degrees)
    gain = rng.uniform(1 - scale, 1 + scale)
    rot[:2] = cv2.getRotationMatrix2D(angle=angle, center=(0, 0), scale=gain)
    shear_m = np.eye(3)
    shear_m[0, 1] = math.tan(rng.uniform(-shear, shear) * math.pi / 180)
    shear_m[1, 0] = math.tan(rng.uniform(-shear, shear) * math.pi / 180)
    move = np.eye(3)
    move[0, 2] = rng.uniform(0.5 - translate, 0.5 + translate) * width
    move[1, 2] = rng.uniform(0.5 - translate, 0.5 + translate) * height
    matrix = move @ shear_m @ rot @ persp @ centre  # applied right to left
    if border != (0, 0) or (matrix != np.eye(3)).any():
        if perspective:
            im = cv2.warpPerspective(im, matrix, dsize=(width, height), borderValue=(PAD_VALUE,) * 3)
        else:
            im = cv2.warpAffine(im, matrix[:2], dsize=(width, height), borderValue=(PAD_VALUE,) * 3)
    n = len(labels)
    if n:
        corners = np.ones((n * 4, 3))
        corners[:, :2] = labels[:, [1, 2, 3, 4, 1, 4, 3, 2]].reshape(n * 4, 2)
        corners = corners @ matrix.T
        xy = (corners[:, :2] / corners[:, 2:3] if perspective else corners[:, :2]).reshape(n, 8)
        xs, ys = xy[:, [0, 2, 4, 6]], xy[:, [1, 3, 5, 7]]
        new = np.stack((xs.min(1), ys.min(1), xs.max(1), ys.max(1)), 1)
        new[:, [0, 2]] = new[:, [0, 2]].clip(0, width)
        new[:, [1, 3]] = new[:, [1, 3]].clip(0, height)
        keep = box_candidates(labels[:, 1:5].T * gain, new.T)
        labels = labels[keep].copy()
        labels[:, 1:5] = new[keep]
    return im, labels


def augment_hsv(im: np.ndarray, rng: np.random.Generator, hgain: float, sgain: float, vgain: float) -> None:
    """Random hue / saturation / value gains applied in place to a BGR uint8 image."""
    if not (hgain or sgain or vgain):
        return
    gains = rng.uniform(-1, 1, 3) * (hgain, sgain, vgain) + 1
    hue, sat, val = cv2.split(cv2.cvtColor(im, cv2.COLOR_BGR2HSV))
    ramp = np.arange(256, dtype=np.float64)
    lut_hue = ((ramp * gains[0]) % 180).astype(np.uint8)
    lut_sat = np.clip(ramp * gains[1], 0, 255).astype(np.uint8)
    lut_val = np.clip(ramp * gains[2], 0, 255).astype(np.uint8)
    merged = cv2.merge((cv2.LUT(hue, lut_hue), cv2.LUT(sat, lut_sat), cv2.LUT(val, lut_val)))
    cv2.cvtColor(merged, cv2.COLOR_HSV2BGR, dst=im)


def mixup(im: np.ndarray, labels: np.ndarray, im2: np.ndarray, labels2: np.ndarray,
          rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Blend two images with a Beta(32, 32) weight and keep both label sets."""
    weight = rng.beta(32.0, 32.0)
    blended = cv2.addWeighted(im, float(weight), im2, float(1 - weight), 0.0)
    return blended, np.concatenate((labels, labels2), 0)


def mosaic_canvas(tiles: list[tuple[np.ndarray, np.ndarray]], size: int,
                  centre: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Place 4 (image, normalised labels) tiles around `centre` (x, y) on a 2*size grey canvas.

    Returns the canvas and the tiles' boxes as pixel (cls, x1, y1, x2, y2), clipped to the canvas.
    """
    xc, yc = centre
    side = size * 2
    canvas = np.full((side, side, tiles[0][0].shape[2]), PAD_VALUE, dtype=np.uint8)
    all_labels = []
    for i, (img, labels) in enumerate(tiles):
        h, w = img.shape[:2]
        if i == 0:  # top left
            x1a, y1a, x2a, y2a = max(xc - w, 0), max(yc - h, 0), xc, yc
            x1b, y1b, x2b, y2b = w - (x2a - x1a), h - (y2a - y1a), w, h
        elif i == 1:  # top right
            x1a, y1a, x2a, y2a = xc, max(yc - h, 0), min(xc + w, side), yc
            x1b, y1b, x2b, y2b = 0, h - (y2a - y1a), min(w, x2a - x1a), h
        elif i == 2:  # bottom left
            x1a, y1a, x2a, y2a = max(xc - w, 0), yc, xc, min(side, yc + h)
            x1b, y1b, x2b, y2b = w - (x2a - x1a), 0, w, min(y2a - y1a, h)
        else:  # bottom right
            x1a, y1a, x2a, y2a = xc, yc, min(xc + w, side), min(side, yc + h)
            x1b, y1b, x2b, y2b = 0, 0, min(w, x2a - x1a), min(y2a - y1a, h)
        canvas[y1a:y2a, x1a:x2a] = img[y1b:y2b, x1b:x2b]
        if len(labels):
            all_labels.append(xywhn_to_xyxy(labels, w, h, x1a - x1b, y1a - y1b))
    boxes = np.concatenate(all_labels, 0) if all_labels else np.zeros((0, 5))
    np.clip(boxes[:, 1:], 0, side, out=boxes[:, 1:])
    return canvas, boxes
