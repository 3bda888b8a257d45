"""From decoded head output to detections: confidence filter, class-aware NMS, and mapping back to the image.

`non_max_suppression` takes the eval-mode output `[B, 4 + nc, A]` (xywh in input pixels, then class
probabilities) and returns one `[n, 6]` tensor per image: x1, y1, x2, y2, conf, cls. `scale_boxes` undoes the
letterbox (resize + padding) so boxes are in original-image pixels; `clip_boxes` keeps them inside the image.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torchvision
from torch import Tensor

from yolotui.engine.loss.boxes import xywh2xyxy


def _decoded_tensor(pred) -> Tensor:
    """The `[B, 4 + nc, A]` tensor from a model output.

    Accepts the tensor itself, an eval-mode `(decoded, maps)` pair, or (as the official dual head returns)
    a list of decoded tensors, aux first, whose last is the main branch; also nested as `([aux, main], maps)`.
    """
    while not isinstance(pred, Tensor):
        if not isinstance(pred, (list, tuple)) or not pred:
            raise TypeError(f"cannot find decoded predictions in a {type(pred).__name__}")
        if all(isinstance(p, Tensor) and p.dim() == 3 for p in pred):
            pred = pred[-1]  # decoded branches, main last
        else:
            pred = pred[0]  # (decoded, maps)
    return pred


MAX_WH = 7680  # class offset of the batched NMS, as the official code: boxes of different classes never overlap


def non_max_suppression(pred, conf_thres: float = 0.001, iou_thres: float = 0.7, max_det: int = 300,
                        classes: Sequence[int] | None = None, agnostic: bool = False, multi_label: bool = False,
                        max_nms: int = 30000) -> list[Tensor]:
    """Per-image detections `[n, 6]` (x1, y1, x2, y2, conf, cls), best first, at most `max_det` each.

    A box is kept when its class probability exceeds `conf_thres` (its best class, or with `multi_label` every
    class over the threshold, as the official validator does); boxes of the same class (any class with
    `agnostic`) overlapping a better one by more than `iou_thres` are dropped. `classes` keeps only those
    class indices. The steps (candidate filter, sort by confidence, class-offset NMS) are the official
    ones, so the same scores give the same detections.
    """
    if not 0 <= conf_thres <= 1:
        raise ValueError(f"conf_thres must be in [0, 1], got {conf_thres}")
    if not 0 <= iou_thres <= 1:
        raise ValueError(f"iou_thres must be in [0, 1], got {iou_thres}")
    pred = _decoded_tensor(pred)
    nc = pred.shape[1] - 4
    multi_label = multi_label and nc > 1
    candidates = pred[:, 4:4 + nc].amax(1) > conf_thres  # [B, A]
    class_filter = None
    if classes is not None:
        class_filter = torch.tensor(list(classes), device=pred.device)
    output = []
    for image_pred, keep_anchor in zip(pred, candidates):
        x = image_pred.transpose(0, 1)[keep_anchor].float()  # [a, 4 + nc]
        if x.shape[0] == 0:
            output.append(x.new_zeros((0, 6)))
            continue
        boxes = xywh2xyxy(x[:, :4])
        scores = x[:, 4:4 + nc]
        if multi_label:
            anchor_index, cls = (scores > conf_thres).nonzero(as_tuple=False).T
            det = torch.cat((boxes[anchor_index], x[anchor_index, 4 + cls, None], cls[:, None].float()), 1)
        else:
            conf, cls = scores.max(1, keepdim=True)
            det = torch.cat((boxes, conf, cls.float()), 1)[conf.view(-1) > conf_thres]
        if class_filter is not None and det.shape[0]:
            det = det[(det[:, 5:6] == class_filter).any(1)]
        if det.shape[0] == 0:
            output.append(det.new_zeros((0, 6)))
            continue
        det = det[det[:, 4].argsort(descending=True)[:max_nms]]
        offsets = det[:, 5:6] * (0 if agnostic else MAX_WH)
        keep = torchvision.ops.nms(det[:, :4] + offsets, det[:, 4], iou_thres)[:max_det]
        output.append(det[keep])
    return output


def clip_boxes(boxes: Tensor, shape: Sequence[int]) -> Tensor:
    """Clip xyxy `boxes [n, >=4]` in place to an image of `shape` (height, width); returns them."""
    height, width = float(shape[0]), float(shape[1])
    boxes[:, 0].clamp_(0, width)
    boxes[:, 1].clamp_(0, height)
    boxes[:, 2].clamp_(0, width)
    boxes[:, 3].clamp_(0, height)
    return boxes


def letterbox_ratio_pad(img1_shape: Sequence[int], img0_shape: Sequence[int]) -> tuple[tuple[float, float],
                                                                                           tuple[float, float]]:
    """The `((ratio_h, ratio_w), (pad_w, pad_h))` of a centred letterbox from `img0_shape` into `img1_shape`."""
    gain = min(img1_shape[0] / img0_shape[0], img1_shape[1] / img0_shape[1])
    pad_w = (img1_shape[1] - round(img0_shape[1] * gain)) / 2
    pad_h = (img1_shape[0] - round(img0_shape[0] * gain)) / 2
    return (gain, gain), (pad_w, pad_h)


def scale_boxes(img1_shape: Sequence[int], boxes: Tensor, img0_shape: Sequence[int], ratio_pad=None,
                clip: bool = True) -> Tensor:
    """Map xyxy `boxes [n, >=4]` (in place) from the letterboxed input `img1_shape` (h, w) to `img0_shape` (h, w).

    `ratio_pad` is `((ratio_h, ratio_w), (pad_w, pad_h))` as the data loader records it; when None it is
    computed for a centred letterbox. A ratio given as one number is used for both axes.
    """
    if ratio_pad is None:
        ratio_pad = letterbox_ratio_pad(img1_shape, img0_shape)
    ratio, pad = ratio_pad
    if isinstance(ratio, (int, float)):
        ratio_h = ratio_w = float(ratio)
    else:
        ratio_h, ratio_w = float(ratio[0]), float(ratio[1])
    pad_w, pad_h = float(pad[0]), float(pad[1])
    boxes[:, [0, 2]] -= pad_w
    boxes[:, [1, 3]] -= pad_h
    boxes[:, [0, 2]] /= ratio_w
    boxes[:, [1, 3]] /= ratio_h
    if clip:
        clip_boxes(boxes, img0_shape)
    return boxes
