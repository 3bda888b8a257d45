"""COCO-format JSON for a validation: ground truth (images, categories, annotations) and predictions.

Boxes are written as COCO `[x, y, w, h]` in original-image pixels; category ids are the data set's class
indices (0-based, as the official repository writes them for non-COCO data sets); image ids count images
in the order seen, from 1. The files load with pycocotools (`COCO(gt)`, `coco.loadRes(pred)`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from yolotui.runs.atomic import atomic_write_text

PREDICTIONS_FILE = "predictions.json"
GROUND_TRUTH_FILE = "ground-truth.json"


def _xyxy_to_coco(boxes: np.ndarray) -> np.ndarray:
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    return np.concatenate((boxes[:, :2], boxes[:, 2:] - boxes[:, :2]), axis=1)


def _as_numpy(value) -> np.ndarray:
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value, dtype=np.float64)


class CocoJsonCollector:
    """Collects images, ground truth and detections, then writes the two COCO files."""

    def __init__(self, names: list[str] | dict) -> None:
        if isinstance(names, dict):
            items = sorted((int(k), str(v)) for k, v in names.items())
        else:
            items = list(enumerate(str(n) for n in names))
        self.categories = [{"id": index, "name": name, "supercategory": "none"} for index, name in items]
        self.images: list[dict] = []
        self.annotations: list[dict] = []
        self.predictions: list[dict] = []

    def add_image(self, path: str, height: int, width: int) -> int:
        """Register an image (original size) and return its id."""
        image_id = len(self.images) + 1
        self.images.append({"id": image_id, "file_name": os.path.basename(str(path)), "path": str(path),
                            "height": int(height), "width": int(width)})
        return image_id

    def add_ground_truth(self, image_id: int, ground_truth) -> None:
        """Ground-truth boxes `[m, 5]` (cls, x1, y1, x2, y2) of image `image_id`, original pixels."""
        ground_truth = _as_numpy(ground_truth).reshape(-1, 5)
        for cls, box in zip(ground_truth[:, 0], _xyxy_to_coco(ground_truth[:, 1:5])):
            x, y, w, h = (round(float(v), 3) for v in box)
            self.annotations.append({"id": len(self.annotations) + 1, "image_id": image_id,
                                     "category_id": int(cls), "bbox": [x, y, w, h], "area": round(w * h, 3),
                                     "iscrowd": 0})

    def add_predictions(self, image_id: int, detections) -> None:
        """Detections `[n, 6]` (x1, y1, x2, y2, conf, cls) of image `image_id`, original pixels."""
        detections = _as_numpy(detections).reshape(-1, 6)
        for box, score, cls in zip(_xyxy_to_coco(detections[:, :4]), detections[:, 4], detections[:, 5]):
            self.predictions.append({"image_id": image_id, "category_id": int(cls),
                                     "bbox": [round(float(v), 3) for v in box], "score": round(float(score), 5)})

    def ground_truth_dict(self) -> dict:
        """The ground-truth file's content."""
        return {"info": {"description": "yolotui validation ground truth"}, "images": self.images,
                "categories": self.categories, "annotations": self.annotations}

    def write(self, folder: str | Path) -> tuple[Path, Path]:
        """Write predictions.json and ground-truth.json into `folder` (atomically); return their paths."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        predictions_path = folder / PREDICTIONS_FILE
        ground_truth_path = folder / GROUND_TRUTH_FILE
        atomic_write_text(predictions_path, json.dumps(self.predictions))
        atomic_write_text(ground_truth_path, json.dumps(self.ground_truth_dict()))
        return predictions_path, ground_truth_path
