"""Task-aligned label assignment (TOOD / YOLOv9 TAL): which anchors learn which ground-truth box.

For every ground-truth box, an anchor's alignment is `score ** alpha * iou ** beta`, where `score` is the
predicted probability of the box's class at that anchor and `iou` the CIoU of the anchor's predicted box
with the ground truth. Among the anchors whose centre lies inside the box, the `topk` best aligned become
positives. An anchor claimed by several boxes keeps the one it overlaps most. Positive anchors get a soft
class target: the alignment, rescaled so that each box's best anchor gets that box's best IoU.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from yolotui.engine.loss.boxes import bbox_ciou


def anchors_inside_boxes(anchor_points: Tensor, gt_boxes: Tensor, eps: float = 1e-9) -> Tensor:
    """Mask `[B, M, A]`: anchor centre `anchor_points [A, 2]` strictly inside box `gt_boxes [B, M, 4]` (xyxy)."""
    top_left, bottom_right = gt_boxes.unsqueeze(2).chunk(2, dim=-1)  # [B, M, 1, 2] each
    points = anchor_points.view(1, 1, -1, 2)
    margins = torch.cat((points - top_left, bottom_right - points), dim=-1)  # [B, M, A, 4]
    return margins.amin(dim=-1) > eps


class TaskAlignedAssigner(nn.Module):
    """Assign anchors to ground-truth boxes by task alignment; see the module docstring.

    Call with (all on one device, boxes in the same pixel units):
    - pred_scores `[B, A, C]`: class probabilities (after sigmoid), detached
    - pred_boxes `[B, A, 4]`: predicted boxes, xyxy, detached
    - anchor_points `[A, 2]`: anchor centres
    - gt_labels `[B, M, 1]`, gt_boxes `[B, M, 4]` (xyxy), gt_mask `[B, M, 1]` (1 for real boxes, 0 for padding)

    Returns `(target_labels [B, A] long, target_boxes [B, A, 4],
    target_scores [B, A, C], fg_mask [B, A] bool, target_gt_index [B, A] long)`; background anchors have
    label `num_classes` and all-zero scores.
    """

    def __init__(self, topk: int = 10, num_classes: int = 80, alpha: float = 0.5, beta: float = 6.0,
                 eps: float = 1e-9) -> None:
        super().__init__()
        self.topk = topk
        self.num_classes = num_classes
        self.alpha = alpha
        self.beta = beta
        self.eps = eps

    @torch.no_grad()
    def forward(self, pred_scores: Tensor, pred_boxes: Tensor, anchor_points: Tensor, gt_labels: Tensor,
                gt_boxes: Tensor, gt_mask: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        batch, num_anchors, _ = pred_scores.shape
        max_boxes = gt_boxes.shape[1]
        device = pred_scores.device
        if max_boxes == 0:
            return (
                torch.full((batch, num_anchors), self.num_classes, dtype=torch.long, device=device),
                torch.zeros_like(pred_boxes),
                torch.zeros_like(pred_scores),
                torch.zeros((batch, num_anchors), dtype=torch.bool, device=device),
                torch.zeros((batch, num_anchors), dtype=torch.long, device=device),
            )

        labels = gt_labels.long().squeeze(-1).clamp(0, self.num_classes - 1)  # [B, M]
        valid = gt_mask.squeeze(-1).bool()  # [B, M]
        inside = anchors_inside_boxes(anchor_points, gt_boxes) & valid.unsqueeze(-1)  # [B, M, A]

        # Predicted probability of each box's class at each anchor: [B, M, A].
        class_scores = pred_scores.permute(0, 2, 1).gather(1, labels.unsqueeze(-1).expand(-1, -1, num_anchors))
        overlaps = bbox_ciou(gt_boxes.unsqueeze(2), pred_boxes.unsqueeze(1)).squeeze(-1).clamp(0)
        overlaps = overlaps * inside
        alignment = class_scores.pow(self.alpha) * overlaps.pow(self.beta)

        # The topk best-aligned anchors inside each real box are its candidates.
        k = min(self.topk, num_anchors)
        top_index = alignment.topk(k, dim=-1).indices  # [B, M, k]
        in_topk = torch.zeros_like(alignment, dtype=torch.bool).scatter_(-1, top_index, True)
        positive = in_topk & inside  # [B, M, A]

        # An anchor claimed by several boxes keeps the box it overlaps most.
        claims = positive.sum(dim=1)  # [B, A]
        if int(claims.max()) > 1:
            claimed_overlaps = torch.where(positive, overlaps, torch.full_like(overlaps, -1.0))
            best_box = F.one_hot(claimed_overlaps.argmax(dim=1), max_boxes).permute(0, 2, 1).bool()  # [B, M, A]
            positive = torch.where((claims > 1).unsqueeze(1), best_box, positive)
        fg_mask = positive.any(dim=1)  # [B, A]
        target_gt_index = positive.float().argmax(dim=1)  # [B, A]

        flat_index = target_gt_index + torch.arange(batch, device=device).unsqueeze(-1) * max_boxes
        target_labels = labels.flatten()[flat_index]  # [B, A]
        target_boxes = gt_boxes.reshape(-1, 4)[flat_index]  # [B, A, 4]
        target_scores = F.one_hot(target_labels, self.num_classes).to(pred_scores.dtype)
        target_scores = target_scores * fg_mask.unsqueeze(-1)

        # Soft targets: alignment normalised per box so its best anchor reaches the box's best IoU.
        alignment = alignment * positive
        best_alignment = alignment.amax(dim=-1, keepdim=True)  # [B, M, 1]
        best_overlap = (overlaps * positive).amax(dim=-1, keepdim=True)  # [B, M, 1]
        normalised = (alignment * best_overlap / (best_alignment + self.eps)).amax(dim=1)  # [B, A]
        target_scores = target_scores * normalised.unsqueeze(-1)
        target_labels = torch.where(fg_mask, target_labels, torch.full_like(target_labels, self.num_classes))
        return target_labels, target_boxes, target_scores, fg_mask, target_gt_index
