"""Detection metrics computed as COCO does: mAP50, mAP50-95 (101-point), plus precision and recall.

Matching follows pycocotools' `COCOeval` for bounding boxes with area range 'all' and `maxDets=100`:
per image and class, detections are taken best score first (at most `max_det_per_class`, 100 by default,
as COCO's maxDets counts per image and category), and each one matches the unmatched ground-truth box of
its class with the highest IoU, if that IoU is at least the threshold, separately at each IoU threshold
0.50, 0.55, ... 0.95. Per class, AP is the mean over 101 recall points of the interpolated precision
(the best precision at that recall or beyond); mAP is the mean over classes that have ground truth.
Classes with detections but no ground truth do not count, as in COCO. The differences from pycocotools:
no crowd boxes or area ranges (all boxes count; pycocotools would also ignore an unmatched detection of
negative area, which NMS output never has), and no ground truth at all gives 0 instead of -1.

Precision and recall are the YOLO-style figures: per class, read off the precision and recall curves
(IoU 0.5) at one confidence, the one where the class-mean F1 (lightly smoothed) is highest.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

IOU_THRESHOLDS = np.linspace(0.5, 0.95, int(np.round((0.95 - 0.5) / 0.05)) + 1, endpoint=True)
RECALL_POINTS = np.linspace(0.0, 1.00, int(np.round((1.00 - 0.0) / 0.01)) + 1, endpoint=True)


def fitness(metrics) -> float:
    """0.1 * mAP50 + 0.9 * mAP50-95, from a metrics dict ('mAP50', 'mAP50-95') or an object (.map50, .map)."""
    if isinstance(metrics, dict):
        return 0.1 * float(metrics["mAP50"]) + 0.9 * float(metrics["mAP50-95"])
    return 0.1 * float(metrics.map50) + 0.9 * float(metrics.map)


def box_iou_np(boxes1: np.ndarray, boxes2: np.ndarray) -> np.ndarray:
    """Pairwise IoU `[N, M]` of xyxy boxes, in float64, 0 where the union is empty."""
    boxes1 = np.asarray(boxes1, dtype=np.float64).reshape(-1, 4)
    boxes2 = np.asarray(boxes2, dtype=np.float64).reshape(-1, 4)
    top_left = np.maximum(boxes1[:, None, :2], boxes2[None, :, :2])
    bottom_right = np.minimum(boxes1[:, None, 2:], boxes2[None, :, 2:])
    inter = np.clip(bottom_right - top_left, 0, None).prod(-1)
    area1 = np.clip(boxes1[:, 2:] - boxes1[:, :2], 0, None).prod(-1)
    area2 = np.clip(boxes2[:, 2:] - boxes2[:, :2], 0, None).prod(-1)
    union = area1[:, None] + area2[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, inter / union, 0.0)


def match_detections(det_boxes: np.ndarray, det_scores: np.ndarray, gt_boxes: np.ndarray,
                     iou_thresholds: np.ndarray = IOU_THRESHOLDS, det_cls: np.ndarray | None = None,
                     gt_cls: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """COCO greedy matching of one image's detections to its ground truth.

    With `det_cls` and `gt_cls` a detection only matches boxes of its own class (classes never compete,
    so one pass over all classes equals COCO's pass per class). Returns `(order, true_positive)`: `order`
    the detections best score first (stable, as COCO sorts), and `true_positive [len(order), T]` whether
    each matched a box at each IoU threshold.
    """
    order = np.argsort(-np.asarray(det_scores, dtype=np.float64), kind="mergesort")
    num_thresholds = len(iou_thresholds)
    true_positive = np.zeros((len(order), num_thresholds), dtype=bool)
    if len(order) == 0 or len(gt_boxes) == 0:
        return order, true_positive
    ious = box_iou_np(np.asarray(det_boxes)[order], gt_boxes)  # [D, G]
    if det_cls is not None and gt_cls is not None:
        same_class = np.asarray(det_cls)[order][:, None] == np.asarray(gt_cls)[None, :]
        ious = np.where(same_class, ious, 0.0)
    thresholds = np.minimum(np.asarray(iou_thresholds, dtype=np.float64), 1 - 1e-10)[:, None]  # [T, 1]
    matched = np.zeros((num_thresholds, ious.shape[1]), dtype=bool)
    threshold_index = np.arange(num_thresholds)
    for d in np.flatnonzero(ious.max(1) >= thresholds.min()):  # the rest miss at every threshold
        row = ious[d]
        candidates = (row[None, :] >= thresholds) & ~matched  # [T, G]
        if not candidates.any():
            continue
        best = np.where(candidates, row[None, :], -1.0).argmax(1)  # [T]
        hit = candidates[threshold_index, best]
        matched[threshold_index[hit], best[hit]] = True
        true_positive[d, hit] = True
    return order, true_positive


def best_per_class(scores: np.ndarray, classes: np.ndarray, limit: int | None) -> np.ndarray:
    """Indices of the `limit` best-scored detections of each class (all when None), in input order."""
    if limit is None or len(scores) <= limit:
        return np.arange(len(scores))
    by_class = np.lexsort((-np.asarray(scores, dtype=np.float64), classes))  # class, then best first (stable)
    sorted_classes = classes[by_class]
    group_start = np.flatnonzero(np.r_[True, sorted_classes[1:] != sorted_classes[:-1]])
    group_sizes = np.diff(np.r_[group_start, len(sorted_classes)])
    rank = np.arange(len(sorted_classes)) - np.repeat(group_start, group_sizes)
    return np.sort(by_class[rank < limit])


def coco_average_precision(true_positive: np.ndarray, num_gt: int) -> float:
    """AP of one class at one IoU threshold from its detections' TP flags, best score first (COCO 101-point)."""
    if num_gt == 0:
        return float("nan")
    tp_cum = np.cumsum(true_positive, dtype=np.float64)
    fp_cum = np.cumsum(~true_positive, dtype=np.float64)
    if len(tp_cum) == 0:
        return 0.0
    recall = tp_cum / num_gt
    precision = tp_cum / (tp_cum + fp_cum + np.spacing(1))
    precision = np.maximum.accumulate(precision[::-1])[::-1]  # best precision at this recall or beyond
    index = np.searchsorted(recall, RECALL_POINTS, side="left")
    sampled = np.where(index < len(precision), precision[np.minimum(index, len(precision) - 1)], 0.0)
    return float(sampled.mean())


def _smooth(values: np.ndarray, fraction: float = 0.05) -> np.ndarray:
    """Box filter over `fraction` of the curve's length (odd width), edges padded with the end values."""
    width = round(len(values) * fraction * 2) // 2 + 1
    pad = width // 2
    padded = np.concatenate((np.full(pad, values[0]), values, np.full(pad, values[-1])))
    return np.convolve(padded, np.ones(width) / width, mode="valid")



def class_name(names, index: int) -> str:
    """The name of class `index` in `names` (a list or a dict), or its number as text when none is known."""
    if isinstance(names, dict):
        return str(names.get(index, index))
    if names is not None and 0 <= index < len(names):
        return str(names[index])
    return str(index)

@dataclass
class ClassResult:
    """Results for one class that has ground truth."""

    index: int
    name: str
    images: int
    instances: int
    precision: float
    recall: float
    map50: float
    map: float

    def to_dict(self) -> dict:
        return {"class": self.index, "name": self.name, "images": self.images, "instances": self.instances,
                "P": self.precision, "R": self.recall, "mAP50": self.map50, "mAP50-95": self.map}


def ap_per_class(true_positive: np.ndarray, conf: np.ndarray, pred_cls: np.ndarray, target_cls: np.ndarray,
                 eps: float = 1e-16) -> dict:
    """Per-class AP at each IoU threshold and P/R at the best-F1 confidence.

    `true_positive [N, T]` must come from COCO matching per image (see `match_detections`); `conf`,
    `pred_cls [N]` the detections' scores and classes; `target_cls [M]` every ground-truth box's class.
    Returns a dict: classes (with ground truth, sorted), instances, ap `[C, T]`, precision `[C]`, recall `[C]`,
    f1 `[C]`, best_conf (the confidence P and R were read at).
    """
    true_positive = np.asarray(true_positive, dtype=bool).reshape(len(conf), -1)
    conf = np.asarray(conf, dtype=np.float64)
    pred_cls = np.asarray(pred_cls).astype(np.int64)
    classes, instances = np.unique(np.asarray(target_cls).astype(np.int64), return_counts=True)
    num_thresholds = true_positive.shape[1] if true_positive.ndim == 2 and true_positive.shape[1] else len(
        IOU_THRESHOLDS)
    ap = np.zeros((len(classes), num_thresholds))
    grid = np.linspace(0, 1, 1000)
    precision_curve = np.zeros((len(classes), len(grid)))
    recall_curve = np.zeros((len(classes), len(grid)))
    order = np.argsort(-conf, kind="mergesort")
    true_positive, conf, pred_cls = true_positive[order], conf[order], pred_cls[order]
    for ci, (cls, num_gt) in enumerate(zip(classes, instances)):
        mine = pred_cls == cls
        tp = true_positive[mine]
        for t in range(num_thresholds):
            ap[ci, t] = coco_average_precision(tp[:, t] if len(tp) else np.zeros(0, bool), int(num_gt))
        if not mine.any():
            continue
        tp_cum = np.cumsum(tp[:, 0], dtype=np.float64)
        fp_cum = np.cumsum(~tp[:, 0], dtype=np.float64)
        recall = tp_cum / (num_gt + eps)
        precision = tp_cum / (tp_cum + fp_cum)
        # Curves against confidence (descending), sampled on a 0..1 grid.
        recall_curve[ci] = np.interp(-grid, -conf[mine], recall, left=0)
        precision_curve[ci] = np.interp(-grid, -conf[mine], precision, left=1)
    f1_curve = 2 * precision_curve * recall_curve / (precision_curve + recall_curve + eps)
    best = int(_smooth(f1_curve.mean(0), 0.1).argmax()) if len(classes) else 0
    return {
        "classes": classes,
        "instances": instances,
        "ap": ap,
        "precision": precision_curve[:, best],
        "recall": recall_curve[:, best],
        "f1": f1_curve[:, best],
        "best_conf": float(grid[best]),
    }


@dataclass
class DetectionMetrics:
    """Accumulates detections and ground truth image by image, then computes COCO-style metrics.

    `update(detections, ground_truth)` takes one image's detections `[n, 6]` (x1, y1, x2, y2, conf, cls) and
    ground truth `[m, 5]` (cls, x1, y1, x2, y2), tensors or arrays, in the same pixel space.
    `compute()` returns a dict: precision, recall, mAP50, mAP50-95, fitness, images, instances,
    per_class (list of dicts: class, name, images, instances, P, R, mAP50, mAP50-95), best_conf.
    """

    nc: int
    names: list[str] | dict | None = None
    iou_thresholds: np.ndarray = field(default_factory=lambda: IOU_THRESHOLDS.copy())
    max_det_per_class: int | None = 100
    _tp: list = field(default_factory=list, repr=False)
    _conf: list = field(default_factory=list, repr=False)
    _pred_cls: list = field(default_factory=list, repr=False)
    _target_cls: list = field(default_factory=list, repr=False)
    _images_per_class: np.ndarray | None = field(default=None, repr=False)
    images: int = 0

    def __post_init__(self) -> None:
        self._images_per_class = np.zeros(max(self.nc, 1), dtype=np.int64)

    def reset(self) -> None:
        """Forget everything accumulated."""
        self._tp, self._conf, self._pred_cls, self._target_cls = [], [], [], []
        self._images_per_class = np.zeros(max(self.nc, 1), dtype=np.int64)
        self.images = 0

    def class_name(self, index: int) -> str:
        """The name of class `index`, or its number as text when no name is known."""
        return class_name(self.names, index)

    def update(self, detections, ground_truth) -> None:
        """Add one image: detections `[n, 6]` (xyxy, conf, cls), ground truth `[m, 5]` (cls, xyxy)."""
        detections = _as_numpy(detections).reshape(-1, 6)
        ground_truth = _as_numpy(ground_truth).reshape(-1, 5)
        self.images += 1
        gt_cls = ground_truth[:, 0].astype(np.int64)
        self._target_cls.append(gt_cls)
        present = np.unique(gt_cls)
        present = present[(present >= 0) & (present < len(self._images_per_class))]
        self._images_per_class[present] += 1
        det_cls = detections[:, 5].astype(np.int64)
        # COCO keeps the best maxDets per image and category, then matches those.
        keep = best_per_class(detections[:, 4], det_cls, self.max_det_per_class)
        detections, det_cls = detections[keep], det_cls[keep]
        order, true_positive = match_detections(detections[:, :4], detections[:, 4], ground_truth[:, 1:5],
                                                self.iou_thresholds, det_cls, gt_cls)
        self._tp.append(true_positive)
        self._conf.append(detections[order, 4])
        self._pred_cls.append(det_cls[order])

    def compute(self) -> dict:
        """Metrics over everything added so far (see the class docstring)."""
        num_thresholds = len(self.iou_thresholds)
        tp = np.concatenate(self._tp) if self._tp else np.zeros((0, num_thresholds), bool)
        conf = np.concatenate(self._conf) if self._conf else np.zeros(0)
        pred_cls = np.concatenate(self._pred_cls) if self._pred_cls else np.zeros(0, np.int64)
        target_cls = np.concatenate(self._target_cls) if self._target_cls else np.zeros(0, np.int64)
        stats = ap_per_class(tp, conf, pred_cls, target_cls)
        ap = stats["ap"]
        per_class = []
        for ci, cls in enumerate(stats["classes"]):
            cls = int(cls)
            images = int(self._images_per_class[cls]) if 0 <= cls < len(self._images_per_class) else 0
            per_class.append(ClassResult(cls, self.class_name(cls), images, int(stats["instances"][ci]),
                                         float(stats["precision"][ci]), float(stats["recall"][ci]),
                                         float(ap[ci, 0]), float(ap[ci].mean())).to_dict())
        has_classes = len(stats["classes"]) > 0
        result = {
            "precision": float(stats["precision"].mean()) if has_classes else 0.0,
            "recall": float(stats["recall"].mean()) if has_classes else 0.0,
            "mAP50": float(ap[:, 0].mean()) if has_classes else 0.0,
            "mAP50-95": float(ap.mean()) if has_classes else 0.0,
            "images": self.images,
            "instances": int(len(target_cls)),
            "best_conf": stats["best_conf"],
            "per_class": per_class,
        }
        result["fitness"] = fitness(result)
        return result


def _as_numpy(value) -> np.ndarray:
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value, dtype=np.float64)
