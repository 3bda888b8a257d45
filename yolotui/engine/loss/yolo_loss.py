"""YOLOv9 training loss: task-aligned assignment, BCE classification, CIoU box loss and DFL.

`YoloLoss(nc, strides)(preds, targets)` takes the head's raw maps, either one list of per-level maps
`[B, 4*reg_max + nc, H, W]` or, for a dual head, `[aux_maps, main_maps]`, and targets `[N, 6]`
(batch_idx, cls, cx, cy, w, h) normalised to the input image. Each branch is assigned and scored on its
own; the auxiliary branch's box, class and DFL terms count `aux_weight` (0.25). The gains (box 7.5, cls
0.5, dfl 1.5) come from `hyp` when it has them. As in the official dual loss, the result is
`(sum of the three gained terms * batch size, detached [box, cls, dfl])`.

The loss is computed in float32 whatever the maps' dtype, so it is safe under autocast. With no targets
(or images without boxes) every anchor is background: only the class term is non-zero, divided by 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from yolotui.engine.loss.assigner import Candidates, TaskAlignedAssigner
from yolotui.engine.loss.boxes import bbox2dist, bbox_ciou, dist2bbox, make_anchors, xywh2xyxy

DEFAULT_GAINS = {"box": 7.5, "cls": 0.5, "dfl": 1.5}


def split_branches(preds) -> list[list[Tensor]]:
    """The model output as a list of branches, each a list of per-level maps; aux branch first.

    Accepts a single list of maps, `[aux_maps, main_maps]`, or an eval-mode `(decoded, maps)` pair.
    """
    if isinstance(preds, tuple) and len(preds) == 2 and isinstance(preds[0], Tensor) and not isinstance(
            preds[1], Tensor):
        preds = preds[1]  # eval mode: (decoded, maps)
    if isinstance(preds, Tensor):
        raise TypeError("YoloLoss needs the head's per-level maps, not a single tensor")
    if len(preds) and isinstance(preds[0], (list, tuple)):
        return [list(branch) for branch in preds]
    return [list(preds)]


class YoloLoss:
    """The YOLOv9 detection loss; see the module docstring. Call with `(preds, targets)`."""

    def __init__(self, nc: int, strides: Sequence[float] | Tensor, reg_max: int = 16, hyp: dict | None = None,
                 label_smoothing: float = 0.0, topk: int = 10, alpha: float = 0.5, beta: float = 6.0,
                 aux_weight: float = 0.25) -> None:
        hyp = hyp or {}
        self.nc = int(nc)
        self.strides = [float(s) for s in (strides.tolist() if isinstance(strides, Tensor) else strides)]
        self.reg_max = int(reg_max)
        self.gains = {key: float(hyp.get(key, default)) for key, default in DEFAULT_GAINS.items()}
        self.label_smoothing = float(label_smoothing or hyp.get("label_smoothing", 0.0) or 0.0)
        self.cls_pos_weight = float(hyp.get("cls_pw", 1.0))
        self.aux_weight = float(aux_weight)
        self.assigner = TaskAlignedAssigner(topk=topk, num_classes=self.nc, alpha=alpha, beta=beta)
        self._bins: Tensor | None = None
        self._anchor_cache: dict[tuple, tuple[Tensor, Tensor]] = {}

    # -- helpers -------------------------------------------------------------------------------------------

    def _bin_values(self, device: torch.device) -> Tensor:
        if self._bins is None or self._bins.device != device:
            self._bins = torch.arange(self.reg_max, dtype=torch.float32, device=device)
        return self._bins

    @staticmethod
    def group_targets(targets: Tensor, batch_size: int, image_wh: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Targets `[N, 6]` to padded per-image `(labels [B, M, 1], boxes xyxy pixels [B, M, 4], mask [B, M, 1])`."""
        device = image_wh.device
        targets = targets.to(device=device, dtype=torch.float32)
        if targets.shape[0] == 0:
            return (torch.zeros(batch_size, 0, 1, device=device), torch.zeros(batch_size, 0, 4, device=device),
                    torch.zeros(batch_size, 0, 1, dtype=torch.bool, device=device))
        image_index = targets[:, 0].long()
        counts = torch.bincount(image_index, minlength=batch_size)
        max_boxes = int(counts.max())
        order = torch.argsort(image_index, stable=True)
        sorted_index = image_index[order]
        starts = torch.cumsum(counts, 0) - counts
        slot = torch.arange(targets.shape[0], device=device) - starts[sorted_index]
        padded = torch.zeros(batch_size, max_boxes, 5, device=device)
        padded[sorted_index, slot] = targets[order, 1:6]
        boxes = xywh2xyxy(padded[..., 1:5] * image_wh.repeat(2))
        mask = (torch.arange(max_boxes, device=device).unsqueeze(0) < counts.unsqueeze(1)).unsqueeze(-1)
        return padded[..., :1], boxes, mask

    def decode(self, anchor_points: Tensor, pred_dist: Tensor) -> Tensor:
        """Distribution logits `[..., 4*reg_max]` to xyxy boxes in grid units (expected bin per side); the anchor
        points `[..., 2]` broadcast against them (`[A, 2]` for `[B, A, 4*reg_max]`, or one row per row)."""
        distances = pred_dist.unflatten(-1, (4, self.reg_max)).softmax(-1) @ self._bin_values(pred_dist.device)
        return dist2bbox(distances, anchor_points, xywh=False)

    def _dfl(self, pred_dist: Tensor, target: Tensor) -> Tensor:
        """Distribution focal loss per positive anchor `[P, 1]`: cross-entropy to the two bins around target."""
        left = target.long()
        right = (left + 1).clamp(max=self.reg_max - 1)
        weight_left = left.float() + 1 - target
        weight_right = 1 - weight_left
        logits = pred_dist.reshape(-1, self.reg_max)
        loss_left = F.cross_entropy(logits, left.view(-1), reduction="none").view(left.shape)
        loss_right = F.cross_entropy(logits, right.view(-1), reduction="none").view(left.shape)
        return (loss_left * weight_left + loss_right * weight_right).mean(-1, keepdim=True)

    def _anchors(self, feats: list[Tensor]) -> tuple[Tensor, Tensor]:
        """(anchor points [A, 2] in grid units, strides [A, 1]) for these map sizes, cached per size."""
        key = (tuple(tuple(f.shape[2:4]) for f in feats), feats[0].device)
        if key not in self._anchor_cache:
            if len(self._anchor_cache) > 8:  # multi-scale training: keep the cache small
                self._anchor_cache.clear()
            self._anchor_cache[key] = make_anchors([f[:1, :1].float() for f in feats], self.strides, 0.5)
        return self._anchor_cache[key]

    def _flatten(self, feats: list[Tensor]) -> Tensor:
        """Per-level maps `[B, C, H, W]` to one `[B, A, C]` float32 tensor, levels in order.

        For channels_last maps (the training memory format) each level's `[B, H, W, C]` view is free, so the
        concatenation is the only copy."""
        batch, channels = feats[0].shape[:2]
        flat = torch.cat([f.permute(0, 2, 3, 1).reshape(batch, -1, channels) for f in feats], 1)
        return flat if flat.dtype == torch.float32 else flat.float()

    def _branch_loss(self, feats: list[Tensor], cands: Candidates, anchor_points: Tensor,
                     stride_tensor: Tensor) -> Tensor:
        """Un-gained `[box, cls, dfl]` for one branch.

        Predictions are decoded without gradient only at the anchors inside some box (all the assigner reads),
        and with gradient only at the positive anchors (all the box and DFL terms read)."""
        batch = feats[0].shape[0]
        pred_dist, pred_logits = self._flatten(feats).split((4 * self.reg_max, self.nc), dim=-1)
        num_anchors = pred_dist.shape[1]

        with torch.no_grad():
            boxes_px = pred_dist.new_zeros((batch, num_anchors, 4))
            if cands.anchor_a.numel():
                rows = pred_dist[cands.anchor_b, cands.anchor_a]
                at = cands.anchor_a
                boxes_px[cands.anchor_b, at] = self.decode(anchor_points[at], rows) * stride_tensor[at]
            pair_scores = pred_logits[cands.pair_b, cands.pair_a, cands.pair_labels].sigmoid()
            _, target_boxes, target_scores, fg_mask, _ = self.assigner.assign(
                cands, pair_scores, boxes_px[cands.pair_b, cands.pair_a], pred_logits.dtype)
        score_sum = target_scores.sum().clamp(min=1.0)

        cls_targets = target_scores
        if self.label_smoothing:
            cls_targets = target_scores * (1.0 - self.label_smoothing) + 0.5 * self.label_smoothing
        pos_weight = None
        if self.cls_pos_weight != 1.0:
            pos_weight = torch.tensor([self.cls_pos_weight], device=pred_logits.device)
        cls_loss = F.binary_cross_entropy_with_logits(pred_logits, cls_targets, pos_weight=pos_weight,
                                                      reduction="sum") / score_sum

        zero = pred_logits.sum() * 0.0  # keeps the graph connected when there are no positives
        box_loss, dfl_loss = zero, zero
        fg_b, fg_a = fg_mask.nonzero(as_tuple=True)
        if fg_a.numel():
            weight = target_scores[fg_b, fg_a].sum(-1, keepdim=True)  # [P, 1]
            points, strides = anchor_points[fg_a], stride_tensor[fg_a]
            dist_logits = pred_dist[fg_b, fg_a]  # [P, 4*reg_max], with gradient
            fg_targets = target_boxes[fg_b, fg_a] / strides  # grid units
            iou = bbox_ciou(self.decode(points, dist_logits), fg_targets)
            box_loss = ((1.0 - iou) * weight).sum() / score_sum
            target_dist = bbox2dist(points, fg_targets, self.reg_max - 1)  # [P, 4]
            dfl_loss = (self._dfl(dist_logits.view(-1, 4, self.reg_max), target_dist) * weight).sum()
            dfl_loss = dfl_loss / score_sum
        return torch.stack((box_loss, cls_loss, dfl_loss))

    # -- entry point ------------------------------------------------------------------------------------------

    def __call__(self, preds, targets: Tensor) -> tuple[Tensor, Tensor]:
        """Loss for a batch: `(sum of gained [box, cls, dfl] * batch size, detached gained [box, cls, dfl])`."""
        branches = split_branches(preds)
        feats = branches[-1]
        device = feats[0].device
        batch, _, height, width = feats[0].shape
        image_wh = torch.tensor([width, height], dtype=torch.float32, device=device) * self.strides[0]
        anchor_points, stride_tensor = self._anchors(feats)
        labels, gt_boxes, gt_mask = self.group_targets(targets, batch, image_wh)
        # the assignable (box, anchor) pairs depend on the ground truth only: found once for every branch
        cands = self.assigner.candidates(anchor_points * stride_tensor, labels, gt_boxes, gt_mask)

        total = torch.zeros(3, device=device)
        for index, branch_feats in enumerate(branches):
            weight = 1.0 if index == len(branches) - 1 else self.aux_weight
            total = total + weight * self._branch_loss(branch_feats, cands, anchor_points, stride_tensor)
        gains = torch.tensor([self.gains["box"], self.gains["cls"], self.gains["dfl"]], device=device)
        total = total * gains
        return total.sum() * batch, total.detach()


def loss_for_model(model: Any, hyp: dict[str, Any], label_smoothing: float) -> YoloLoss:
    """The YOLOv9 loss for `model`'s head (its nc, strides and reg_max)."""
    return YoloLoss(int(model.nc), model.stride, reg_max=int(getattr(model, "reg_max", 16)), hyp=hyp,
                    label_smoothing=label_smoothing)
