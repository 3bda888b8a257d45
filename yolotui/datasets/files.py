"""Image listing and the image -> label path rule of YOLO-format data sets (torch-free)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

IMAGE_SUFFIXES = (".bmp", ".dng", ".jpeg", ".jpg", ".mpo", ".png", ".tif", ".tiff", ".webp", ".pfm")


def is_image_name(name: str) -> bool:
    """True when `name` ends with a suffix the loaders can read (case-insensitive)."""
    return name.lower().endswith(IMAGE_SUFFIXES)


def _read_list_file(list_file: Path) -> list[str]:
    """Image paths listed one a line in a .txt file; relative lines are relative to the file's folder."""
    base = list_file.parent
    images = []
    for raw in list_file.read_text(encoding="utf-8", errors="replace").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        path = Path(line)
        images.append(str(path if path.is_absolute() else (base / path)))
    return [os.path.normpath(p) for p in images]


def list_images(sources: Iterable[str]) -> list[str]:
    """Every image named by `sources` (folders searched recursively, .txt lists, single image files).

    The result is sorted and free of duplicates, so it does not depend on file-system order.
    Paths listed in a .txt file are kept even when the file is missing: the label check reports them.
    """
    found: set[str] = set()
    for source in sources:
        path = Path(source)
        if path.is_dir():
            for root, _dirs, names in os.walk(path, followlinks=True):
                found.update(os.path.join(root, n) for n in names if is_image_name(n))
        elif path.suffix.lower() == ".txt":
            found.update(p for p in _read_list_file(path) if is_image_name(p))
        elif is_image_name(path.name):
            found.add(os.path.normpath(str(path)))
    return sorted(found)


def label_path_for(image_path: str) -> str:
    """The label file of an image: the last `images` folder in its path becomes `labels`, the suffix `.txt`.

    An image with no `images` folder in its path has its label file beside it.
    """
    path = Path(image_path)
    parts = list(path.parts)
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] == "images":
            parts[i] = "labels"
            break
    return str(Path(*parts).with_suffix(".txt"))
