"""A dense reference of the YOLOv9 loss for the equivalence test: every anchor decoded with gradient and the CIoU
of every (box, anchor) pair computed, masked afterwards, in the plainest formulation (slow, obviously right).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from yolotui.engine.loss.boxes import bbox2dist, bbox_ciou, dist2bbox, make_anchors
from yolotui.engine.loss.yolo_loss import YoloLoss, split_branches


def dense_assign(nc, topk, alpha, beta, pred_scores, pred_boxes, anchor_points, gt_labels, gt_boxes, gt_mask,
                 eps=1e-9):
    """Dense task-aligned assignment over all [B, M, A] pairs; returns (target_boxes, target_scores, fg_mask)."""
    batch, num_anchors, _ = pred_scores.shape
    max_boxes = gt_boxes.shape[1]
    if max_boxes == 0:
        return (torch.zeros_like(pred_boxes), torch.zeros_like(pred_scores),
                torch.zeros((batch, num_anchors), dtype=torch.bool))
    labels = gt_labels.long().squeeze(-1).clamp(0, nc - 1)
    valid = gt_mask.squeeze(-1).bool()
    top_left, bottom_right = gt_boxes.unsqueeze(2).chunk(2, dim=-1)
    points = anchor_points.view(1, 1, -1, 2)
    inside = torch.cat((points - top_left, bottom_right - points), -1).amin(-1) > eps
    inside = inside & valid.unsqueeze(-1)
    class_scores = pred_scores.permute(0, 2, 1).gather(1, labels.unsqueeze(-1).expand(-1, -1, num_anchors))
    overlaps = bbox_ciou(gt_boxes.unsqueeze(2), pred_boxes.unsqueeze(1)).squeeze(-1).clamp(0) * inside
    alignment = class_scores.pow(alpha) * overlaps.pow(beta)
    top = alignment.topk(min(topk, num_anchors), dim=-1).indices
    positive = torch.zeros_like(alignment, dtype=torch.bool).scatter_(-1, top, True) & inside
    claims = positive.sum(1)
    if int(claims.max()) > 1:
        best = F.one_hot(torch.where(positive, overlaps, torch.full_like(overlaps, -1.0)).argmax(1),
                         max_boxes).permute(0, 2, 1).bool()
        positive = torch.where((claims > 1).unsqueeze(1), best, positive)
    fg = positive.any(1)
    gt_index = positive.float().argmax(1) + torch.arange(batch).unsqueeze(-1) * max_boxes
    target_labels = labels.flatten()[gt_index]
    target_boxes = gt_boxes.reshape(-1, 4)[gt_index]
    scores = F.one_hot(target_labels, nc).float() * fg.unsqueeze(-1)
    alignment = alignment * positive
    norm = (alignment * (overlaps * positive).amax(-1, keepdim=True)
            / (alignment.amax(-1, keepdim=True) + eps)).amax(1)
    return target_boxes, scores * norm.unsqueeze(-1), fg


def dense_loss(loss: YoloLoss, preds, targets):
    """The loss of `preds` (same contract as YoloLoss.__call__) computed densely."""
    branches = split_branches(preds)
    feats = branches[-1]
    batch, _, height, width = feats[0].shape
    image_wh = torch.tensor([width, height], dtype=torch.float32) * loss.strides[0]
    points, strides = make_anchors([f.float() for f in feats], loss.strides, 0.5)
    labels, gt_boxes, gt_mask = loss.group_targets(targets, batch, image_wh)
    bins = torch.arange(loss.reg_max, dtype=torch.float32)
    total = torch.zeros(3)
    fg_masks = []
    for index, branch in enumerate(branches):
        channels = 4 * loss.reg_max + loss.nc
        flat = torch.cat([f.float().reshape(batch, channels, -1) for f in branch], 2)
        dist, logits = flat.split((4 * loss.reg_max, loss.nc), 1)
        dist, logits = dist.permute(0, 2, 1), logits.permute(0, 2, 1)
        b, a, c = dist.shape
        boxes = dist2bbox(dist.reshape(b, a, 4, c // 4).softmax(-1) @ bins, points, xywh=False)
        target_boxes, target_scores, fg = dense_assign(
            loss.nc, loss.assigner.topk, loss.assigner.alpha, loss.assigner.beta, logits.detach().sigmoid(),
            boxes.detach() * strides, points * strides, labels, gt_boxes, gt_mask)
        fg_masks.append(fg)
        target_boxes = target_boxes / strides
        score_sum = target_scores.sum().clamp(min=1.0)
        cls = F.binary_cross_entropy_with_logits(logits, target_scores, reduction="sum") / score_sum
        box = dfl = logits.sum() * 0.0
        if fg.any():
            weight = target_scores.sum(-1)[fg].unsqueeze(-1)
            box = ((1.0 - bbox_ciou(boxes[fg], target_boxes[fg])) * weight).sum() / score_sum
            target_dist = bbox2dist(points, target_boxes, loss.reg_max - 1)[fg]
            dfl = (loss._dfl(dist[fg].reshape(-1, 4, loss.reg_max), target_dist) * weight).sum() / score_sum
        total = total + (1.0 if index == len(branches) - 1 else loss.aux_weight) * torch.stack((box, cls, dfl))
    total = total * torch.tensor([loss.gains["box"], loss.gains["cls"], loss.gains["dfl"]])
    return total.sum() * batch, total.detach(), fg_masks
