"""The label and image check of a YOLO-format data set, cached beside the labels (torch-free).

Every image gets one verdict. A missing label file makes a background image; a corrupt image or a bad
label line (class id outside [0, nc), a coordinate outside [0, 1], a wrong column count, a value that is
not a number, a duplicate row) leaves that image out with exactly one warning line naming the image,
the label file and line, and what is wrong. Results are cached in `<labels folder>.cache.json`, keyed by
the image list, nc, and every image's and label's size and mtime, so a changed file is checked again.
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from yolotui.datasets.files import label_path_for
from yolotui.errors import UserError

CACHE_VERSION = 1
CACHE_SUFFIX = ".cache.json"
MIN_IMAGE_SIDE = 10
_COORD_EPS = 1e-6


@dataclass
class CheckReport:
    """Outcome of `check_labels`.

    found / missing / empty / corrupt partition the images: usable with labels, usable without a label
    file (background), usable with an empty label file, and left out. `duplicates` counts the images left
    out for duplicate rows (a subset of `corrupt`); `below_min_items` those dropped by `min_items`.
    """

    images: int = 0
    usable: list[tuple[str, np.ndarray]] = field(default_factory=list)
    shapes: list[tuple[int, int]] = field(default_factory=list)  # (h, w) of each usable image
    warnings: list[str] = field(default_factory=list)
    found: int = 0
    missing: int = 0
    empty: int = 0
    corrupt: int = 0
    duplicates: int = 0
    below_min_items: int = 0
    boxes: int = 0
    cache_path: str | None = None
    cache_hit: bool = False

    @property
    def summary(self) -> str:
        """One line: counts of found, missing, empty and corrupt images and the usable total."""
        text = (f"{self.images} images: {self.found} labelled, {self.missing} missing labels (background), "
                f"{self.empty} empty, {self.corrupt} corrupt (left out)")
        if self.below_min_items:
            text += f", {self.below_min_items} below --min-items"
        return text + f"; {len(self.usable)} usable, {self.boxes} boxes"

    def require_usable(self, what: str) -> None:
        """Raise UserError (exit status 1) when no image of `what` is usable."""
        if not self.usable:
            first = f"; first problem: {self.warnings[0].removeprefix('WARNING ')}" if self.warnings else ""
            raise UserError(f"{what}: no usable image ({self.summary}){first}; fix the warnings above or the paths",
                            exit_code=1)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (without the label arrays)."""
        return {"images": self.images, "usable": len(self.usable), "found": self.found, "missing": self.missing,
                "empty": self.empty, "corrupt": self.corrupt, "duplicates": self.duplicates,
                "below_min_items": self.below_min_items, "boxes": self.boxes, "warnings": list(self.warnings),
                "cache_path": self.cache_path, "cache_hit": self.cache_hit, "summary": self.summary}


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _image_shape(image_path: str) -> tuple[int, int]:
    """(h, w) of a readable image; raises ValueError with a short reason otherwise."""
    if not os.path.isfile(image_path):
        raise ValueError("image file not found")
    try:
        from PIL import Image
    except ImportError:  # pillow comes with torchvision; fall back to a full decode
        return _decode_shape(image_path)
    try:
        with Image.open(image_path) as im:
            im.verify()
        with Image.open(image_path) as im:
            w, h = im.size
            fmt = (im.format or "").lower()
            if im.getexif().get(0x0112, 1) in (5, 6, 7, 8):  # EXIF-rotated by 90 degrees: decoders swap w, h
                w, h = h, w
    except Exception as exc:  # noqa: BLE001 - any decoder failure means "corrupt"
        raise ValueError(f"corrupt image ({_one_line(exc)})") from None
    if fmt in ("jpeg", "mpo"):
        with open(image_path, "rb") as handle:
            handle.seek(-2, os.SEEK_END)
            if handle.read() != b"\xff\xd9":
                _decode_shape(image_path)  # a truncated JPEG is usable only if it still decodes
    return h, w


def _decode_shape(image_path: str) -> tuple[int, int]:
    import cv2

    im = cv2.imread(image_path, cv2.IMREAD_COLOR)
    if im is None:
        raise ValueError("corrupt image (cannot decode)")
    return int(im.shape[0]), int(im.shape[1])


def _polygon_to_box(values: list[float]) -> list[float]:
    xs, ys = values[0::2], values[1::2]
    x1, x2, y1, y2 = min(xs), max(xs), min(ys), max(ys)
    return [(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1]


def _parse_labels(label_file: str, nc: int) -> tuple[np.ndarray, str | None, bool]:
    """Rows [n, 5] (cls, cx, cy, w, h) of a label file, the first problem found (or None), duplicate flag."""
    rows: list[list[float]] = []
    seen: dict[tuple[float, ...], int] = {}
    with open(label_file, encoding="utf-8", errors="replace") as handle:
        lines = handle.read().splitlines()
    for number, raw in enumerate(lines, start=1):
        fields = raw.split()
        if not fields:
            continue
        where = f"{label_file} line {number}"
        try:
            values = [float(v) for v in fields]
        except ValueError:
            bad = next(v for v in fields if not _is_number(v))
            return np.zeros((0, 5), np.float32), f"{where}: {bad!r} is not a number", False
        polygon = len(values) >= 7 and len(values) % 2 == 1
        if len(values) != 5 and not polygon:
            return (np.zeros((0, 5), np.float32),
                    f"{where}: {len(values)} columns, expected 5 (class cx cy w h)", False)
        cls = values[0]
        if cls != int(cls) or not 0 <= cls < nc:
            return np.zeros((0, 5), np.float32), f"{where}: class id {fields[0]} outside [0, {nc})", False
        coords = values[1:]
        outside = [c for c in coords if not (-_COORD_EPS <= c <= 1 + _COORD_EPS)]
        if outside:
            return (np.zeros((0, 5), np.float32),
                    f"{where}: coordinate {outside[0]:g} outside [0, 1] (labels must be normalised)", False)
        box = _polygon_to_box(coords) if polygon else coords
        row = [cls, *[min(max(c, 0.0), 1.0) for c in box]]
        key = tuple(np.float32(row).tolist())
        if key in seen:
            return np.zeros((0, 5), np.float32), f"{where}: duplicates line {seen[key]}", True
        seen[key] = number
        rows.append(row)
    return np.asarray(rows, dtype=np.float32).reshape(-1, 5), None, False


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _check_one(image_path: str, nc: int) -> dict[str, Any]:
    """The verdict for one image and its label file, as a JSON-ready dict."""
    label_file = label_path_for(image_path)
    try:
        h, w = _image_shape(image_path)
    except ValueError as exc:
        return {"ok": False, "warning": f"{image_path}: {exc}; image left out", "duplicate": False}
    if min(h, w) < MIN_IMAGE_SIDE:
        return {"ok": False, "warning": f"{image_path}: image is {w}x{h}, smaller than {MIN_IMAGE_SIDE} pixels; "
                "image left out", "duplicate": False}
    if not os.path.isfile(label_file):
        return {"ok": True, "label": "missing", "shape": [h, w], "labels": []}
    try:
        labels, problem, duplicate = _parse_labels(label_file, nc)
    except OSError as exc:
        problem, duplicate, labels = f"{label_file}: cannot read ({_one_line(exc)})", False, None
    if problem is not None:
        return {"ok": False, "warning": f"{image_path}: {problem}; image left out", "duplicate": duplicate}
    return {"ok": True, "label": "found" if len(labels) else "empty", "shape": [h, w], "labels": labels.tolist()}


def _stat_key(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return "-"
    return f"{st.st_size}:{st.st_mtime_ns}"


def cache_path_for(images: list[str]) -> Path:
    """Where the check of `images` is cached: `<first image's labels folder>.cache.json`."""
    labels_dir = Path(label_path_for(images[0])).parent
    return labels_dir.parent / (labels_dir.name + CACHE_SUFFIX)


def _cache_key(images: list[str], nc: int) -> str:
    digest = hashlib.sha256(f"v{CACHE_VERSION} nc={nc}\n".encode())
    for image in images:
        digest.update(f"{image}\0{_stat_key(image)}\0{_stat_key(label_path_for(image))}\n".encode())
    return digest.hexdigest()


def _load_cache(path: Path, key: str, count: int) -> list[dict[str, Any]] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != key or len(data.get("entries", ())) != count:
        return None
    return data["entries"]


def _save_cache(path: Path, key: str, entries: list[dict[str, Any]]) -> bool:
    from yolotui.runs.atomic import atomic_write_text

    if not path.parent.is_dir():
        return False  # never create folders inside the user's data set just for the cache
    try:
        atomic_write_text(path, json.dumps({"version": CACHE_VERSION, "key": key, "entries": entries}))
    except OSError:
        return False  # a read-only data set is checked again next time; not an error
    return True


def check_labels(images: list[str], nc: int, cache: bool = True, min_items: int = 0,
                 workers: int | None = None) -> CheckReport:
    """Check every image and its label file; see the module docstring for the rules.

    `min_items` drops usable images with fewer boxes than that (the official --min-items).
    No usable image is not raised here: call `report.require_usable(...)`.
    """
    report = CheckReport(images=len(images))
    if not images:
        return report
    entries: list[dict[str, Any]] | None = None
    key = _cache_key(images, nc) if cache else ""
    cache_file = cache_path_for(images) if cache else None
    if cache_file is not None:
        report.cache_path = str(cache_file)
        entries = _load_cache(cache_file, key, len(images))
        report.cache_hit = entries is not None
    if entries is None:
        workers = workers or min(8, os.cpu_count() or 1)
        if workers > 1 and len(images) > 16:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                entries = list(pool.map(lambda p: _check_one(p, nc), images, chunksize=32))
        else:
            entries = [_check_one(p, nc) for p in images]
        if cache_file is not None and not _save_cache(cache_file, key, entries):
            report.cache_path = None
    for image, entry in zip(images, entries):
        if not entry["ok"]:
            report.corrupt += 1
            report.duplicates += int(entry.get("duplicate", False))
            report.warnings.append(f"WARNING {entry['warning']}")
            continue
        setattr(report, entry["label"], getattr(report, entry["label"]) + 1)
        labels = np.asarray(entry["labels"], dtype=np.float32).reshape(-1, 5)
        if len(labels) < min_items:
            report.below_min_items += 1
            continue
        report.usable.append((image, labels))
        report.shapes.append((int(entry["shape"][0]), int(entry["shape"][1])))
        report.boxes += len(labels)
    return report
