"""Validation: run a model over a loader, apply NMS, and score it as the official validator does.

The pipeline is the official validator's (val.py / val_dual.py): multi-label NMS (every class above `conf`
per box; `single_label=True` keeps only each box's best class), boxes compared in original-image pixels
(predictions and ground truth both mapped back through each image's letterbox, `ratio_pad` from the loader,
with one gain for both axes, the height's, as the official scale_boxes does), and the official matching and
AP (metrics_official; `coco_metrics=True` for pycocotools' maths, metrics.py). Give it a loader over a
`YoloDataset(rect=True)` for the official rectangular batches. With `loss_fn` the validation losses (box, cls, dfl)
are averaged over batches; with `save_json_dir` the COCO files predictions.json and ground-truth.json are
written there, ready for pycocotools.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from yolotui.engine.evaluate.coco_json import CocoJsonCollector
from yolotui.engine.evaluate.metrics import DetectionMetrics
from yolotui.engine.evaluate.metrics_official import OfficialDetectionMetrics
from yolotui.engine.evaluate.postprocess import non_max_suppression, scale_boxes
from yolotui.engine.loss.boxes import xywh2xyxy


@dataclass
class ValResult:
    """What a validation found. `map` is mAP50-95; `per_class` rows are dicts (see DetectionMetrics)."""

    precision: float
    recall: float
    map50: float
    map: float
    per_class: list[dict]
    losses: tuple[float, float, float] | None
    seconds: float
    images: int = 0
    instances: int = 0
    fitness: float = 0.0
    best_conf: float = 0.0
    predictions_json: Path | None = None
    ground_truth_json: Path | None = None

    def metrics(self) -> dict:
        """The four headline figures under the event / results names: P, R, mAP50, mAP50-95."""
        return {"P": self.precision, "R": self.recall, "mAP50": self.map50, "mAP50-95": self.map}

    def to_dict(self) -> dict:
        """Plain JSON-ready dict (paths as strings)."""
        data = asdict(self)
        data["mAP50"], data["mAP50-95"] = data.pop("map50"), data.pop("map")
        for key in ("predictions_json", "ground_truth_json"):
            data[key] = str(data[key]) if data[key] is not None else None
        data["losses"] = (dict(zip(("box", "cls", "dfl"), self.losses)) if self.losses is not None else None)
        return data


def split_eval_output(output) -> tuple[Tensor, object | None]:
    """`(decoded [B, 4+nc, A], maps or None)` from an eval-mode model output."""
    if isinstance(output, Tensor):
        return output, None
    if isinstance(output, (list, tuple)) and len(output) == 2 and not isinstance(output[1], Tensor):
        return output[0], output[1]
    return output, None


def _image_meta(batch: dict, index: int, input_shape: tuple[int, int]):
    """Original (h, w) and ratio_pad of image `index` in `batch`, identity when the loader gave none."""
    shapes = batch.get("ori_shapes")
    ratio_pads = batch.get("ratio_pad")
    shape0 = tuple(int(v) for v in shapes[index]) if shapes is not None else input_shape
    ratio_pad = ratio_pads[index] if ratio_pads is not None else ((1.0, 1.0), (0.0, 0.0))
    if ratio_pad is not None:
        ratio, pad = ratio_pad
        gain = float(ratio) if isinstance(ratio, (int, float)) else float(ratio[0])
        ratio_pad = ((gain, gain), pad)  # the official gain: the height ratio, for both axes
    return shape0, ratio_pad


@torch.no_grad()
def validate(model: nn.Module, loader, device, nc: int, names, loss_fn=None,
             save_json_dir: str | Path | None = None, conf: float = 0.001, iou: float = 0.7, max_det: int = 300,
             progress: Callable[[int, int], None] | None = None, single_label: bool = False,
             coco_metrics: bool = False) -> ValResult:
    """Validate `model` on `loader` (batches as dicts: img uint8 [B,3,H,W], targets [N,6], ori_shapes,
    ratio_pad, paths) and return a ValResult. The model is put in eval mode and restored afterwards.

    `progress(done, total)` is called after each batch when given. `single_label` keeps one class per box
    in NMS (yolotui's behaviour before it matched the official validator). The figures are the official
    validator's (metrics_official); `coco_metrics` scores as pycocotools does instead (metrics).
    """
    device = torch.device(device)
    was_training = model.training
    model.eval()
    param = next(model.parameters(), None)
    dtype = param.dtype if param is not None else torch.float32
    metrics = DetectionMetrics(nc, names) if coco_metrics else OfficialDetectionMetrics(nc, names)
    collector = CocoJsonCollector(names) if save_json_dir is not None else None
    loss_total = torch.zeros(3)
    loss_batches = 0
    try:
        total_batches = len(loader)
    except TypeError:
        total_batches = 0
    start = time.perf_counter()
    try:
        for batch_index, batch in enumerate(loader):
            images = batch["img"].to(device, non_blocking=True)
            images = (images.to(dtype) / 255.0) if images.dtype == torch.uint8 else images.to(dtype)
            targets = batch["targets"].to(device).float()
            decoded, maps = split_eval_output(model(images))
            if loss_fn is not None and maps is not None:
                loss_total += loss_fn(maps, targets)[1].float().cpu()
                loss_batches += 1
            detections = non_max_suppression(decoded, conf_thres=conf, iou_thres=iou, max_det=max_det,
                                             multi_label=not single_label)
            height, width = images.shape[2:]
            scale = torch.tensor([width, height, width, height], device=device, dtype=torch.float32)
            paths = batch.get("paths")
            for i, det in enumerate(detections):
                shape0, ratio_pad = _image_meta(batch, i, (height, width))
                labels = targets[targets[:, 0] == i]
                gt_boxes = scale_boxes((height, width), xywh2xyxy(labels[:, 2:6] * scale), shape0, ratio_pad)
                ground_truth = torch.cat((labels[:, 1:2], gt_boxes), 1)
                det = det.clone()
                scale_boxes((height, width), det[:, :4], shape0, ratio_pad)
                metrics.update(det, ground_truth)
                if collector is not None:
                    path = paths[i] if paths is not None else f"image{len(collector.images) + 1}"
                    image_id = collector.add_image(path, shape0[0], shape0[1])
                    collector.add_ground_truth(image_id, ground_truth)
                    collector.add_predictions(image_id, det)
            if progress is not None:
                progress(batch_index + 1, total_batches)
    finally:
        model.train(was_training)
    seconds = time.perf_counter() - start
    summary = metrics.compute()
    losses = None
    if loss_batches:
        losses = tuple(float(v) for v in (loss_total / loss_batches))
    predictions_json = ground_truth_json = None
    if collector is not None:
        predictions_json, ground_truth_json = collector.write(save_json_dir)
    return ValResult(precision=summary["precision"], recall=summary["recall"], map50=summary["mAP50"],
                     map=summary["mAP50-95"], per_class=summary["per_class"], losses=losses, seconds=seconds,
                     images=summary["images"], instances=summary["instances"], fitness=summary["fitness"],
                     best_conf=summary["best_conf"], predictions_json=predictions_json,
                     ground_truth_json=ground_truth_json)


def validation_metrics(model: nn.Module, loader, device, nc: int, names, loss_fn) -> dict:
    """`validate` as the trainer records it: {P, R, mAP50, mAP50-95, losses [box, cls, dfl], per_class}."""
    result = validate(model, loader, device, nc, names, loss_fn=loss_fn)
    losses = [float(v) for v in result.losses] if result.losses is not None else [0.0, 0.0, 0.0]
    return {"P": float(result.precision), "R": float(result.recall), "mAP50": float(result.map50),
            "mAP50-95": float(result.map), "losses": losses, "per_class": result.per_class}
