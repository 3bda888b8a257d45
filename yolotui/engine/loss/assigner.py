"""Task-aligned label assignment (TOOD / YOLOv9 TAL): which anchors learn which ground-truth box.

For every ground-truth box, an anchor's alignment is `score ** alpha * iou ** beta`, where `score` is the
predicted probability of the box's class at that anchor and `iou` the CIoU of the anchor's predicted box
with the ground truth. Among the anchors whose centre lies inside the box, the `topk` best aligned become
positives. An anchor claimed by several boxes keeps the one it overlaps most. Positive anchors get a soft
class target: the alignment, rescaled so that each box's best anchor gets that box's best IoU.

Scores and CIoU are only computed for the (box, anchor) pairs whose anchor centre lies inside the box (every
other pair has alignment 0): `candidates()` finds those pairs once per batch from the ground truth alone (a
dual head's two branches share them), and `assign()` takes each branch's predictions at the pairs only.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from yolotui.engine.loss.boxes import bbox_ciou


def anchors_inside_boxes(anchor_points: Tensor, gt_boxes: Tensor, eps: float = 1e-9) -> Tensor:
    """Mask `[B, M, A]`: anchor centre `anchor_points [A, 2]` strictly inside box `gt_boxes [B, M, 4]` (xyxy)."""
    px, py = anchor_points[:, 0].view(1, 1, -1), anchor_points[:, 1].view(1, 1, -1)
    x1, y1, x2, y2 = (gt_boxes[..., i:i + 1] for i in range(4))  # [B, M, 1] each
    # the smallest of the four margins above eps <=> each of them above eps (the same subtractions)
    return ((px - x1) > eps) & ((py - y1) > eps) & ((x2 - px) > eps) & ((y2 - py) > eps)


def any_over_boxes(mask: Tensor) -> Tensor:
    """`mask [B, M, A]` (bool) -> `[B, A]`: true where any box is. Reducing a bool tensor over a middle dimension
    with `any` is two orders of magnitude slower on the CPU than the uint8 maximum used here (same result)."""
    if mask.shape[1] == 0:
        return mask.new_zeros((mask.shape[0], mask.shape[2]))
    return mask.view(torch.uint8).amax(dim=1).bool()


def first_true_over_boxes(mask: Tensor) -> Tensor:
    """`mask [B, M, A]` (bool) -> `[B, A]` long: the first box index that is true, 0 where none is (what
    `mask.float().argmax(dim=1)` gives, without the CPU's slow arg-reduction over a middle dimension)."""
    boxes = mask.shape[1]
    if boxes == 0:
        return torch.zeros((mask.shape[0], mask.shape[2]), dtype=torch.long, device=mask.device)
    rank = torch.arange(boxes, 0, -1, dtype=torch.int16 if boxes < 32767 else torch.int32, device=mask.device)
    best = (mask * rank.view(1, -1, 1)).amax(dim=1)  # boxes - first index, 0 where none
    return torch.where(best > 0, boxes - best.long(), 0)


def argmax_over_boxes(values: Tensor) -> Tensor:
    """`values [B, M, A]` -> `[B, A]`: the first index of the largest value over the boxes, as `argmax(dim=1)`."""
    return first_true_over_boxes(values == values.amax(dim=1, keepdim=True))


@dataclass
class Candidates:
    """The (box, anchor) pairs of a batch that can be assigned: real boxes and the anchors inside them.

    `inside` is the dense `[B, M, A]` mask; `pair_b`, `pair_m`, `pair_a` its K true positions (row-major), with the
    box `pair_boxes [K, 4]` and class `pair_labels [K]` of each; `anchor_b`, `anchor_a` the anchors inside at least
    one box (where predictions need decoding). `labels [B, M]` are the boxes' classes, clamped to the class range.
    """

    labels: Tensor
    gt_boxes: Tensor
    inside: Tensor
    pair_b: Tensor
    pair_m: Tensor
    pair_a: Tensor
    pair_boxes: Tensor
    pair_labels: Tensor
    anchor_b: Tensor
    anchor_a: Tensor

    @property
    def shape(self) -> tuple[int, int, int]:
        """(batch, boxes per image, anchors)."""
        b, m, a = self.inside.shape
        return int(b), int(m), int(a)


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
        cands = self.candidates(anchor_points, gt_labels, gt_boxes, gt_mask)
        scores = pred_scores[cands.pair_b, cands.pair_a, cands.pair_labels]
        boxes = pred_boxes[cands.pair_b, cands.pair_a]
        return self.assign(cands, scores, boxes, pred_scores.dtype)

    @torch.no_grad()
    def candidates(self, anchor_points: Tensor, gt_labels: Tensor, gt_boxes: Tensor, gt_mask: Tensor) -> Candidates:
        """The assignable pairs of a batch (ground truth only: no prediction is read)."""
        labels = gt_labels.long().squeeze(-1).clamp(0, self.num_classes - 1)  # [B, M]
        valid = gt_mask.squeeze(-1).bool()  # [B, M]
        inside = anchors_inside_boxes(anchor_points, gt_boxes) & valid.unsqueeze(-1)  # [B, M, A]
        pair_b, pair_m, pair_a = inside.nonzero(as_tuple=True)
        anchor_b, anchor_a = any_over_boxes(inside).nonzero(as_tuple=True)
        return Candidates(labels, gt_boxes, inside, pair_b, pair_m, pair_a, gt_boxes[pair_b, pair_m],
                          labels[pair_b, pair_m], anchor_b, anchor_a)

    @torch.no_grad()
    def assign(self, cands: Candidates, pair_scores: Tensor, pair_boxes: Tensor,
               score_dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        """Assignment from the predictions at the candidate pairs: `pair_scores [K]` (probability of the pair's
        box class at its anchor) and `pair_boxes [K, 4]` (the anchor's predicted box, xyxy); returns as `forward`."""
        batch, max_boxes, num_anchors = cands.shape
        device = cands.inside.device
        gt_boxes = cands.gt_boxes
        if max_boxes == 0:
            return (
                torch.full((batch, num_anchors), self.num_classes, dtype=torch.long, device=device),
                torch.zeros((batch, num_anchors, 4), dtype=gt_boxes.dtype, device=device),
                torch.zeros((batch, num_anchors, self.num_classes), dtype=score_dtype, device=device),
                torch.zeros((batch, num_anchors), dtype=torch.bool, device=device),
                torch.zeros((batch, num_anchors), dtype=torch.long, device=device),
            )
        labels, inside = cands.labels, cands.inside
        index = (cands.pair_b, cands.pair_m, cands.pair_a)
        pair_iou = bbox_ciou(cands.pair_boxes, pair_boxes).squeeze(-1).clamp(0)
        overlaps = torch.zeros((batch, max_boxes, num_anchors), dtype=pair_iou.dtype, device=device)
        overlaps[index] = pair_iou
        alignment = torch.zeros_like(overlaps)
        alignment[index] = pair_scores.to(pair_iou.dtype).pow(self.alpha) * pair_iou.pow(self.beta)

        # The topk best-aligned anchors inside each real box are its candidates.
        k = min(self.topk, num_anchors)
        top_index = alignment.topk(k, dim=-1).indices  # [B, M, k]
        in_topk = torch.zeros_like(alignment, dtype=torch.bool).scatter_(-1, top_index, True)
        positive = in_topk & inside  # [B, M, A]

        # An anchor claimed by several boxes keeps the box it overlaps most.
        claims = positive.sum(dim=1)  # [B, A]
        if int(claims.max()) > 1:
            claimed_overlaps = torch.where(positive, overlaps, torch.full_like(overlaps, -1.0))
            best_box = F.one_hot(argmax_over_boxes(claimed_overlaps), max_boxes).permute(0, 2, 1).bool()  # [B, M, A]
            positive = torch.where((claims > 1).unsqueeze(1), best_box, positive)
        fg_mask = any_over_boxes(positive)  # [B, A]
        target_gt_index = first_true_over_boxes(positive)  # [B, A]

        flat_index = target_gt_index + torch.arange(batch, device=device).unsqueeze(-1) * max_boxes
        target_labels = labels.flatten()[flat_index]  # [B, A]
        target_boxes = gt_boxes.reshape(-1, 4)[flat_index]  # [B, A, 4]
        target_scores = F.one_hot(target_labels, self.num_classes).to(score_dtype)
        target_scores = target_scores * fg_mask.unsqueeze(-1)

        # Soft targets: alignment normalised per box so its best anchor reaches the box's best IoU.
        alignment = alignment * positive
        best_alignment = alignment.amax(dim=-1, keepdim=True)  # [B, M, 1]
        best_overlap = (overlaps * positive).amax(dim=-1, keepdim=True)  # [B, M, 1]
        normalised = (alignment * best_overlap / (best_alignment + self.eps)).amax(dim=1)  # [B, A]
        target_scores = target_scores * normalised.unsqueeze(-1)
        target_labels = torch.where(fg_mask, target_labels, torch.full_like(target_labels, self.num_classes))
        return target_labels, target_boxes, target_scores, fg_mask, target_gt_index
