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


def affine_matrix(rng: np.random.Generator, in_hw: tuple[int, int], out_hw: tuple[int, int], degrees: float = 0.0,
                  translate: float = 0.1, scale: float = 0.5, shear: float = 0.0,
                  perspective: float = 0.0) -> tuple[np.ndarray, float]:
    """The random 3x3 warp of `random_affine` from an `in_hw` image to an `out_hw` one, and its scale gain.

    Draws, in this order: perspective (2), angle, gain, shear (2), translation (2)."""
    height, width = out_hw
    centre = np.eye(3)
    centre[0, 2], centre[1, 2] = -in_hw[1] / 2, -in_hw[0] / 2
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
    return move @ shear_m @ rot @ persp @ centre, float(gain)  # applied right to left


def source_region(matrix: np.ndarray, out_hw: tuple[int, int], in_hw: tuple[int, int],
                  margin: int = 2) -> tuple[int, int, int, int]:
    """(x0, y0, x1, y1): the pixels of an `in_hw` image that an affine `matrix` warp to `out_hw` can read
    (the bounds of the output's corners mapped back, `margin` pixels wider for the interpolation taps),
    clipped to the image and never empty."""
    height, width = out_hw
    corners = np.array([[0, 0, 1], [width, 0, 1], [0, height, 1], [width, height, 1]], dtype=np.float64)
    back = corners @ np.linalg.inv(matrix).T
    xs, ys = back[:, 0] / back[:, 2], back[:, 1] / back[:, 2]
    x0 = int(min(max(math.floor(xs.min()) - margin, 0), in_hw[1] - 1))
    y0 = int(min(max(math.floor(ys.min()) - margin, 0), in_hw[0] - 1))
    x1 = int(max(min(math.ceil(xs.max()) + margin, in_hw[1]), x0 + 1))
    y1 = int(max(min(math.ceil(ys.max()) + margin, in_hw[0]), y0 + 1))
    return x0, y0, x1, y1


def warp_image(im: np.ndarray, matrix: np.ndarray, out_hw: tuple[int, int], perspective: bool,
               offset: tuple[int, int] = (0, 0)) -> np.ndarray:
    """`im` warped by `matrix` to `out_hw`, grey outside; `im` may be a crop of the image `matrix` was drawn for,
    starting at pixel `offset` (x, y) of it (affine warps only).

    Warping the crop that holds every pixel read (`source_region`) gives the whole image's warp up to OpenCV's
    coordinate rounding: about 0.2 % of the pixels differ, by one grey level, at 640 px."""
    height, width = out_hw
    border = (PAD_VALUE,) * 3
    if offset != (0, 0):
        if perspective:
            raise ValueError("a perspective warp reads the whole image; no crop offset")
        shift = np.eye(3)
        shift[0, 2], shift[1, 2] = offset
        matrix = matrix @ shift
    if perspective:
        return cv2.warpPerspective(im, matrix, dsize=(width, height), borderValue=border)
    return cv2.warpAffine(im, matrix[:2], dsize=(width, height), borderValue=border)


def warp_boxes(labels: np.ndarray, matrix: np.ndarray, gain: float, out_hw: tuple[int, int],
               perspective: bool) -> np.ndarray:
    """Pixel boxes (cls, x1, y1, x2, y2) through `matrix`: the bounds of their warped corners, clipped to the
    output, dropped when too small after the warp (`box_candidates`)."""
    n = len(labels)
    if not n:
        return labels
    height, width = out_hw
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
    return labels


def random_affine(im: np.ndarray, labels: np.ndarray, rng: np.random.Generator, degrees: float = 0.0,
                  translate: float = 0.1, scale: float = 0.5, shear: float = 0.0, perspective: float = 0.0,
                  border: tuple[int, int] = (0, 0)) -> tuple[np.ndarray, np.ndarray]:
    """Random perspective / rotation / scale / shear / translation of an image and its pixel boxes.

    `border` (negative, per side) crops the output, as the mosaic's 2s canvas is cut back to s.
    Boxes are the bounds of their warped corners, clipped, and dropped when too small after the warp.
    """
    out_hw = (im.shape[0] + border[0] * 2, im.shape[1] + border[1] * 2)
    matrix, gain = affine_matrix(rng, im.shape[:2], out_hw, degrees, translate, scale, shear, perspective)
    if border != (0, 0) or (matrix != np.eye(3)).any():
        im = warp_image(im, matrix, out_hw, bool(perspective))
    return im, warp_boxes(labels, matrix, gain, out_hw, bool(perspective))


def augment_hsv(im: np.ndarray, rng: np.random.Generator, hgain: float, sgain: float, vgain: float,
                to_rgb: bool = False) -> None:
    """Random hue / saturation / value gains applied in place to a BGR uint8 image (left RGB with `to_rgb`).

    One three-channel lookup table on the HSV image (no split and merge), and the conversion back writes the
    colour order the caller wants: the same pixels as per-channel tables, two passes fewer."""
    if not (hgain or sgain or vgain):
        if to_rgb:
            cv2.cvtColor(im, cv2.COLOR_BGR2RGB, dst=im)
        return
    gains = rng.uniform(-1, 1, 3) * (hgain, sgain, vgain) + 1
    hsv = cv2.cvtColor(im, cv2.COLOR_BGR2HSV)
    ramp = np.arange(256, dtype=np.float64)
    lut = np.empty((256, 1, 3), dtype=np.uint8)
    lut[:, 0, 0] = ((ramp * gains[0]) % 180).astype(np.uint8)
    lut[:, 0, 1] = np.clip(ramp * gains[1], 0, 255).astype(np.uint8)
    lut[:, 0, 2] = np.clip(ramp * gains[2], 0, 255).astype(np.uint8)
    cv2.LUT(hsv, lut, dst=hsv)
    cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB if to_rgb else cv2.COLOR_HSV2BGR, dst=im)


def mixup(im: np.ndarray, labels: np.ndarray, im2: np.ndarray, labels2: np.ndarray,
          rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Blend two images with a Beta(32, 32) weight and keep both label sets."""
    weight = rng.beta(32.0, 32.0)
    blended = cv2.addWeighted(im, float(weight), im2, float(1 - weight), 0.0)
    return blended, np.concatenate((labels, labels2), 0)


def mosaic_canvas(tiles: list[tuple[np.ndarray, np.ndarray]], size: int, centre: tuple[int, int],
                  region: tuple[int, int, int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Place 4 (image, normalised labels) tiles around `centre` (x, y) on a 2*size grey canvas.

    Returns the canvas and the tiles' boxes as pixel (cls, x1, y1, x2, y2), clipped to the canvas. With
    `region` (x0, y0, x1, y1) only that part of the canvas is built (what a warp will read); the boxes stay in
    whole-canvas pixels.
    """
    xc, yc = centre
    side = size * 2
    rx0, ry0, rx1, ry1 = region or (0, 0, side, side)
    canvas = np.full((ry1 - ry0, rx1 - rx0, tiles[0][0].shape[2]), PAD_VALUE, dtype=np.uint8)
    all_labels = []
    for i, (img, labels) in enumerate(tiles):
        h, w = img.shape[:2]
        # canvas rectangle (x1a, y1a)-(x2a, y2a) shows the tile from its pixel (x1b, y1b) on
        if i == 0:  # top left
            x1a, y1a, x2a, y2a = max(xc - w, 0), max(yc - h, 0), xc, yc
            x1b, y1b = w - (x2a - x1a), h - (y2a - y1a)
        elif i == 1:  # top right
            x1a, y1a, x2a, y2a = xc, max(yc - h, 0), min(xc + w, side), yc
            x1b, y1b = 0, h - (y2a - y1a)
        elif i == 2:  # bottom left
            x1a, y1a, x2a, y2a = max(xc - w, 0), yc, xc, min(side, yc + h)
            x1b, y1b = w - (x2a - x1a), 0
        else:  # bottom right
            x1a, y1a, x2a, y2a = xc, yc, min(xc + w, side), min(side, yc + h)
            x1b, y1b = 0, 0
        # the part of this tile inside the region (canvas c*, relative to the region's corner when written)
        cx0, cy0, cx1, cy1 = max(x1a, rx0), max(y1a, ry0), min(x2a, rx1), min(y2a, ry1)
        if cx1 > cx0 and cy1 > cy0:
            canvas[cy0 - ry0:cy1 - ry0, cx0 - rx0:cx1 - rx0] = img[y1b + cy0 - y1a:y1b + cy1 - y1a,
                                                                   x1b + cx0 - x1a:x1b + cx1 - x1a]
        if len(labels):
            all_labels.append(xywhn_to_xyxy(labels, w, h, x1a - x1b, y1a - y1b))
    boxes = np.concatenate(all_labels, 0) if all_labels else np.zeros((0, 5))
    np.clip(boxes[:, 1:], 0, side, out=boxes[:, 1:])
    return canvas, boxes
