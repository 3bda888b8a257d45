"""Detection metrics as the official YOLOv9 validator computes them (val.py / val_dual.py, utils/metrics.py).

The same figures the official validator prints, so a yolotui validation and an official one of the same
predictions agree: matching per image and IoU threshold pairs ground truth and detections (each detection's best-IoU
label, then each label's most confident detection; each used once; IoU in float32 as torch computes it); AP is the
area (trapezoid rule over 101 recall points) under the precision envelope; P and R are read at the
confidence where the class-mean F1, lightly smoothed, is highest; nothing counts when no detection is a
true positive at IoU 0.5. They differ slightly from pycocotools (metrics.DetectionMetrics), which matches
greedily by score and averages 101 step samples.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from yolotui.engine.evaluate.metrics import ClassResult, class_name, fitness

_EPS = 1e-16


def _iou_thresholds() -> torch.Tensor:
    return torch.linspace(0.5, 0.95, 10)


def box_iou_official(boxes1: torch.Tensor, boxes2: torch.Tensor, eps: float = 1e-7) -> torch.Tensor:
    """Pairwise IoU `[N, M]` of xyxy boxes, computed in the order (and float32) of the official code."""
    (a1, a2), (b1, b2) = boxes1.unsqueeze(1).chunk(2, 2), boxes2.unsqueeze(0).chunk(2, 2)
    inter = (torch.min(a2, b2) - torch.max(a1, b1)).clamp(0).prod(2)
    return inter / ((a2 - a1).prod(2) + (b2 - b1).prod(2) - inter + eps)


def match_official(detections: torch.Tensor, labels: torch.Tensor, iou_thresholds: torch.Tensor) -> np.ndarray:
    """`correct [N, T]`: whether each detection (xyxy, conf, cls) is a true positive at each IoU threshold.

    For each threshold, candidate (label, detection) pairs of the same class with IoU at or above it are
    ranked best IoU first; each detection keeps its best pair, then each label the remaining pair of the
    first detection in input order (NMS order: the most confident), exactly as the official process_batch.
    """
    correct = np.zeros((detections.shape[0], iou_thresholds.shape[0]), dtype=bool)
    iou = box_iou_official(labels[:, 1:], detections[:, :4])
    same_class = labels[:, 0:1] == detections[:, 5]
    for t in range(len(iou_thresholds)):
        hit = torch.where((iou >= iou_thresholds[t]) & same_class)
        if not hit[0].shape[0]:
            continue
        matches = torch.cat((torch.stack(hit, 1), iou[hit[0], hit[1]][:, None]), 1).cpu().numpy()
        if hit[0].shape[0] > 1:
            matches = matches[matches[:, 2].argsort()[::-1]]
            matches = matches[np.unique(matches[:, 1], return_index=True)[1]]
            matches = matches[np.unique(matches[:, 0], return_index=True)[1]]
        correct[matches[:, 1].astype(int), t] = True
    return correct


def _smooth(values: np.ndarray, fraction: float) -> np.ndarray:
    width = round(len(values) * fraction * 2) // 2 + 1
    ones = np.ones(width // 2)
    padded = np.concatenate((ones * values[0], values, ones * values[-1]), 0)
    return np.convolve(padded, np.ones(width) / width, mode="valid")


def area_under_envelope(recall: np.ndarray, precision: np.ndarray) -> float:
    """AP of one class at one threshold: trapezoid rule over 101 recall points of the precision envelope."""
    mrec = np.concatenate(([0.0], recall, [1.0]))
    mpre = np.concatenate(([1.0], precision, [0.0]))
    mpre = np.flip(np.maximum.accumulate(np.flip(mpre)))
    x = np.linspace(0, 1, 101)
    return float(np.trapezoid(np.interp(x, mrec, mpre), x))


def ap_per_class_official(tp: np.ndarray, conf: np.ndarray, pred_cls: np.ndarray, target_cls: np.ndarray) -> dict:
    """classes (with ground truth), instances, ap [C, T], precision/recall/f1 [C] at the best-F1 confidence."""
    order = np.argsort(-conf)  # numpy's default sort, as the official code: ties fall the same way
    tp, conf, pred_cls = tp[order], conf[order], pred_cls[order]
    classes, instances = np.unique(target_cls, return_counts=True)
    grid = np.linspace(0, 1, 1000)
    ap = np.zeros((len(classes), tp.shape[1]))
    p_curve, r_curve = np.zeros((len(classes), 1000)), np.zeros((len(classes), 1000))
    for ci, cls in enumerate(classes):
        mine = pred_cls == cls
        n_labels, n_preds = instances[ci], mine.sum()
        if n_preds == 0 or n_labels == 0:
            continue
        fpc = (1 - tp[mine]).cumsum(0)
        tpc = tp[mine].cumsum(0)
        recall = tpc / (n_labels + _EPS)
        r_curve[ci] = np.interp(-grid, -conf[mine], recall[:, 0], left=0)
        precision = tpc / (tpc + fpc)
        p_curve[ci] = np.interp(-grid, -conf[mine], precision[:, 0], left=1)
        for t in range(tp.shape[1]):
            ap[ci, t] = area_under_envelope(recall[:, t], precision[:, t])
    f1 = 2 * p_curve * r_curve / (p_curve + r_curve + _EPS)
    best = int(_smooth(f1.mean(0), 0.1).argmax()) if len(classes) else 0
    return {"classes": classes.astype(int), "instances": instances, "ap": ap, "precision": p_curve[:, best],
            "recall": r_curve[:, best], "f1": f1[:, best], "best_conf": float(grid[best])}


@dataclass
class OfficialDetectionMetrics:
    """Accumulates images like metrics.DetectionMetrics (same `update` / `compute` and result keys), scored
    as the official validator scores them (see the module docstring)."""

    nc: int
    names: list[str] | dict | None = None
    iou_thresholds: torch.Tensor = field(default_factory=_iou_thresholds)
    _stats: list = field(default_factory=list, repr=False)
    _images_per_class: np.ndarray | None = field(default=None, repr=False)
    images: int = 0

    def __post_init__(self) -> None:
        self._images_per_class = np.zeros(max(self.nc, 1), dtype=np.int64)

    def class_name(self, index: int) -> str:
        """The name of class `index`, or its number as text when no name is known."""
        return class_name(self.names, index)

    def update(self, detections, ground_truth) -> None:
        """Add one image: detections `[n, 6]` (xyxy, conf, cls), ground truth `[m, 5]` (cls, xyxy)."""
        detections = torch.as_tensor(detections, dtype=torch.float32).reshape(-1, 6).cpu()
        ground_truth = torch.as_tensor(ground_truth, dtype=torch.float32).reshape(-1, 5).cpu()
        self.images += 1
        gt_cls = ground_truth[:, 0].numpy()
        present = np.unique(gt_cls.astype(np.int64))
        present = present[(present >= 0) & (present < len(self._images_per_class))]
        self._images_per_class[present] += 1
        correct = np.zeros((detections.shape[0], len(self.iou_thresholds)), dtype=bool)
        if detections.shape[0] and ground_truth.shape[0]:
            correct = match_official(detections, ground_truth, self.iou_thresholds)
        self._stats.append((correct, detections[:, 4].numpy(), detections[:, 5].numpy(), gt_cls))

    def compute(self) -> dict:
        """precision, recall, mAP50, mAP50-95, fitness, images, instances, per_class, best_conf."""
        num_t = len(self.iou_thresholds)
        if self._stats:
            tp, conf, pred_cls, target_cls = (np.concatenate(x, 0) for x in zip(*self._stats))
        else:
            tp, conf, pred_cls, target_cls = np.zeros((0, num_t), bool), np.zeros(0), np.zeros(0), np.zeros(0)
        result = {"precision": 0.0, "recall": 0.0, "mAP50": 0.0, "mAP50-95": 0.0, "images": self.images,
                  "instances": int(len(target_cls)), "best_conf": 0.0, "per_class": []}
        if tp.any():  # the official validator reports zeros when nothing matched at all
            stats = ap_per_class_official(tp, conf, pred_cls, target_cls)
            ap = stats["ap"]
            result.update({"precision": float(stats["precision"].mean()), "recall": float(stats["recall"].mean()),
                           "mAP50": float(ap[:, 0].mean()), "mAP50-95": float(ap.mean(1).mean()),
                           "best_conf": stats["best_conf"]})
            for ci, cls in enumerate(stats["classes"]):
                cls = int(cls)
                images = int(self._images_per_class[cls]) if 0 <= cls < len(self._images_per_class) else 0
                result["per_class"].append(ClassResult(
                    cls, self.class_name(cls), images, int(stats["instances"][ci]), float(stats["precision"][ci]),
                    float(stats["recall"][ci]), float(ap[ci, 0]), float(ap[ci].mean())).to_dict())
        result["fitness"] = fitness(result)
        return result
