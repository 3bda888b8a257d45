"""Box geometry shared by the head, the loss and the metrics: formats, anchors, distances, IoU."""

from __future__ import annotations

import math

import torch
from torch import Tensor


def xywh2xyxy(boxes: Tensor) -> Tensor:
    """Centre-size boxes `(cx, cy, w, h)` to corner boxes `(x1, y1, x2, y2)` (last dimension)."""
    xy, wh = boxes[..., :2], boxes[..., 2:4] / 2
    return torch.cat((xy - wh, xy + wh), dim=-1)


def xyxy2xywh(boxes: Tensor) -> Tensor:
    """Corner boxes `(x1, y1, x2, y2)` to centre-size boxes `(cx, cy, w, h)` (last dimension)."""
    x1y1, x2y2 = boxes[..., :2], boxes[..., 2:4]
    return torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), dim=-1)


def make_anchors(feats: list[Tensor], strides: Tensor | list[float], offset: float = 0.5) -> tuple[Tensor, Tensor]:
    """Anchor centres (in grid units of each level) and their strides for feature maps `[B, C, H, W]`.

    Returns `points [A, 2]` (x, y) and `stride_tensor [A, 1]`, levels concatenated in order.
    """
    points, stride_list = [], []
    dtype, device = feats[0].dtype, feats[0].device
    for feat, stride in zip(feats, strides):
        h, w = feat.shape[2:4]
        sx = torch.arange(w, device=device, dtype=dtype) + offset
        sy = torch.arange(h, device=device, dtype=dtype) + offset
        gy, gx = torch.meshgrid(sy, sx, indexing="ij")
        points.append(torch.stack((gx, gy), -1).view(-1, 2))
        stride_list.append(torch.full((h * w, 1), float(stride), dtype=dtype, device=device))
    return torch.cat(points), torch.cat(stride_list)


def dist2bbox(distance: Tensor, anchor_points: Tensor, xywh: bool = True, dim: int = -1) -> Tensor:
    """Distances (left, top, right, bottom) from anchor points to boxes, as xywh or xyxy."""
    lt, rb = distance.chunk(2, dim)
    x1y1 = anchor_points - lt
    x2y2 = anchor_points + rb
    if xywh:
        return torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), dim)
    return torch.cat((x1y1, x2y2), dim)


def bbox2dist(anchor_points: Tensor, boxes_xyxy: Tensor, reg_max: int) -> Tensor:
    """Corner boxes to (left, top, right, bottom) distances from anchor points, clamped below reg_max."""
    x1y1, x2y2 = boxes_xyxy.chunk(2, -1)
    return torch.cat((anchor_points - x1y1, x2y2 - anchor_points), -1).clamp(0, reg_max - 0.01)


def box_iou(boxes1: Tensor, boxes2: Tensor, eps: float = 1e-7) -> Tensor:
    """Pairwise IoU of corner boxes `[N, 4]` and `[M, 4]` -> `[N, M]`."""
    (a1, a2), (b1, b2) = boxes1[:, None].chunk(2, 2), boxes2.unsqueeze(0).chunk(2, 2)
    inter = (torch.min(a2, b2) - torch.max(a1, b1)).clamp(0).prod(2)
    area1 = (a2 - a1).prod(2)
    area2 = (b2 - b1).prod(2)
    return inter / (area1 + area2 - inter + eps)


def bbox_ciou(box1: Tensor, box2: Tensor, eps: float = 1e-7) -> Tensor:
    """Element-wise complete IoU (CIoU) of corner boxes `[..., 4]`; returns `[..., 1]`."""
    b1_x1, b1_y1, b1_x2, b1_y2 = box1.chunk(4, -1)
    b2_x1, b2_y1, b2_x2, b2_y2 = box2.chunk(4, -1)
    w1, h1 = b1_x2 - b1_x1, (b1_y2 - b1_y1).clamp(eps)
    w2, h2 = b2_x2 - b2_x1, (b2_y2 - b2_y1).clamp(eps)
    inter = (torch.min(b1_x2, b2_x2) - torch.max(b1_x1, b2_x1)).clamp(0) * (
        torch.min(b1_y2, b2_y2) - torch.max(b1_y1, b2_y1)
    ).clamp(0)
    union = w1 * h1 + w2 * h2 - inter + eps
    iou = inter / union
    cw = torch.max(b1_x2, b2_x2) - torch.min(b1_x1, b2_x1)
    ch = torch.max(b1_y2, b2_y2) - torch.min(b1_y1, b2_y1)
    c2 = cw**2 + ch**2 + eps
    rho2 = ((b2_x1 + b2_x2 - b1_x1 - b1_x2) ** 2 + (b2_y1 + b2_y2 - b1_y1 - b1_y2) ** 2) / 4
    v = (4 / math.pi**2) * (torch.atan(w2 / h2) - torch.atan(w1 / h1)).pow(2)
    with torch.no_grad():
        alpha = v / (v - iou + (1 + eps))
    return iou - (rho2 / c2 + v * alpha)
