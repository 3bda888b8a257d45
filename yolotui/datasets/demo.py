"""The demo data set: coloured shapes of several classes on varied backgrounds (numpy + OpenCV, no torch).

Every image is a pure function of (seed, split, index), so the same arguments give the same files.
Classes are told apart by shape, not colour; shapes vary in size, overlap a little, and some images
are pure background (an empty label file).
"""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np
import yaml

from yolotui.errors import UserError

CLASS_NAMES = ["circle", "square", "triangle", "diamond", "cross"]
_SPLIT_SALT = {"train": 0, "val": 1}
_BACKGROUND_ONLY = 0.06  # share of images with no shape


def _background(rng: np.random.Generator, size: int) -> np.ndarray:
    kind = rng.integers(4)
    base = rng.integers(0, 256, 3)
    if kind == 0:  # flat colour
        return np.broadcast_to(base.astype(np.uint8), (size, size, 3)).copy()
    if kind == 1:  # linear gradient between two colours
        other = rng.integers(0, 256, 3)
        t = np.linspace(0.0, 1.0, size, dtype=np.float32)
        ramp = t[None, :, None] if rng.random() < 0.5 else t[:, None, None]
        img = base * (1 - ramp) + other * ramp
        return np.broadcast_to(img, (size, size, 3)).astype(np.uint8).copy()
    if kind == 2:  # noise around a colour
        noise = rng.normal(0.0, 25.0, (size, size, 3))
        return np.clip(base + noise, 0, 255).astype(np.uint8)
    img = np.broadcast_to(base.astype(np.uint8), (size, size, 3)).copy()  # stripes
    other = tuple(int(v) for v in rng.integers(0, 256, 3))
    period = int(rng.integers(8, 32))
    for x in range(0, 2 * size, period):
        cv2.line(img, (x, 0), (x - size, size), other, max(1, period // 3))
    return img


def _polygon(cls: int, cx: float, cy: float, r: float, angle: float) -> np.ndarray:
    if cls == 1:  # square
        pts = [(-r, -r), (r, -r), (r, r), (-r, r)]
    elif cls == 2:  # triangle
        pts = [(r * math.cos(a), r * math.sin(a)) for a in (-math.pi / 2, math.pi / 6, 5 * math.pi / 6)]
    elif cls == 3:  # diamond
        pts = [(0, -r), (0.65 * r, 0), (0, r), (-0.65 * r, 0)]
    else:  # cross (12 corners)
        t = r / 3
        pts = [(-t, -r), (t, -r), (t, -t), (r, -t), (r, t), (t, t), (t, r), (-t, r), (-t, t), (-r, t), (-r, -t),
               (-t, -t)]
    c, s = math.cos(angle), math.sin(angle)
    return np.array([(cx + x * c - y * s, cy + x * s + y * c) for x, y in pts], dtype=np.float64)


def _draw_shape(img: np.ndarray, rng: np.random.Generator, cls: int, cx: float, cy: float, r: float,
                colour: tuple[int, int, int]) -> tuple[float, float, float, float]:
    """Draw one shape; return its pixel box (x1, y1, x2, y2), clipped to the image."""
    size = img.shape[0]
    if cls == 0:  # circle
        cv2.circle(img, (round(cx * 16), round(cy * 16)), round(r * 16), colour, -1, cv2.LINE_AA, shift=4)
        x1, y1, x2, y2 = cx - r, cy - r, cx + r, cy + r
    else:
        angle = float(rng.uniform(-0.5, 0.5)) if cls in (1, 2, 4) else 0.0
        pts = _polygon(cls, cx, cy, r, angle)
        cv2.fillPoly(img, [np.round(pts * 16).astype(np.int32)], colour, cv2.LINE_AA, shift=4)
        x1, y1 = pts.min(0)
        x2, y2 = pts.max(0)
    return max(x1, 0.0), max(y1, 0.0), min(x2, float(size)), min(y2, float(size))


def _contrasting_colour(rng: np.random.Generator, img: np.ndarray, cx: float, cy: float) -> tuple[int, int, int]:
    under = img[int(min(cy, img.shape[0] - 1)), int(min(cx, img.shape[1] - 1))].astype(int)
    for _ in range(20):
        colour = rng.integers(0, 256, 3)
        if np.abs(colour - under).sum() > 180:
            break
    return tuple(int(v) for v in colour)


def _iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def make_demo_image(seed: int, split: str, index: int,
                    size: int) -> tuple[np.ndarray, list[tuple[int, float, float, float, float]]]:
    """One demo image (BGR uint8) and its labels [(cls, cx, cy, w, h) normalised]."""
    rng = np.random.default_rng([seed, _SPLIT_SALT.get(split, 2), index])
    img = _background(rng, size)
    labels: list[tuple[int, float, float, float, float]] = []
    if rng.random() < _BACKGROUND_ONLY:
        return img, labels
    boxes: list[tuple[float, float, float, float]] = []
    for _ in range(int(rng.integers(1, 7))):
        for _attempt in range(10):
            r = float(size * rng.uniform(0.04, 0.22))
            cx, cy = (float(v) for v in rng.uniform(r * 0.6, size - r * 0.6, 2))
            probe = (cx - r, cy - r, cx + r, cy + r)
            if all(_iou(probe, b) < 0.3 for b in boxes):  # some overlap, never hidden
                break
        else:
            continue
        cls = int(rng.integers(len(CLASS_NAMES)))
        x1, y1, x2, y2 = _draw_shape(img, rng, cls, cx, cy, r, _contrasting_colour(rng, img, cx, cy))
        if x2 - x1 < 3 or y2 - y1 < 3:
            continue
        boxes.append((x1, y1, x2, y2))
        labels.append((cls, (x1 + x2) / 2 / size, (y1 + y2) / 2 / size, (x2 - x1) / size, (y2 - y1) / size))
    return img, labels


def make_demo_dataset(folder: str | Path = "demo-data", n_train: int = 128, n_val: int = 32, img: int = 256,
                      seed: int = 0) -> Path:
    """Write images/{train,val}, labels/{train,val} and data.yaml under `folder`; return the yaml's path."""
    root = Path(folder).expanduser().resolve()
    for split, count in (("train", n_train), ("val", n_val)):
        image_dir, label_dir = root / "images" / split, root / "labels" / split
        try:
            image_dir.mkdir(parents=True, exist_ok=True)
            label_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"cannot make the demo data set in {root}: {exc.strerror or exc}; give a new or empty "
                            "folder") from None
        for index in range(count):
            image, labels = make_demo_image(seed, split, index, img)
            stem = f"{split}_{index:05d}"
            cv2.imwrite(str(image_dir / f"{stem}.jpg"), image, [cv2.IMWRITE_JPEG_QUALITY, 92])
            lines = [f"{c} {x:.6f} {y:.6f} {w:.6f} {h:.6f}" for c, x, y, w, h in labels]
            (label_dir / f"{stem}.txt").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    data = {"path": str(root), "train": "images/train", "val": "images/val", "nc": len(CLASS_NAMES),
            "names": list(CLASS_NAMES)}
    yaml_path = root / "data.yaml"
    header = "# yolotui demo data set: coloured shapes (yolotui demo-data). 'path' is absolute so the\n" \
             "# official YOLOv9 train_dual.py reads it too; delete the line to move the folder.\n"
    yaml_path.write_text(header + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return yaml_path
