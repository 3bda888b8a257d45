"""TaskAlignedAssigner: positives inside boxes, topk, one box per anchor, padding, soft scores."""

from __future__ import annotations

import torch

from yolotui.engine.loss.assigner import TaskAlignedAssigner, anchors_inside_boxes

torch.set_num_threads(1)


def grid_points(size: int = 16, stride: float = 8.0) -> torch.Tensor:
    coords = (torch.arange(size, dtype=torch.float32) + 0.5) * stride
    gy, gx = torch.meshgrid(coords, coords, indexing="ij")
    return torch.stack((gx, gy), -1).view(-1, 2)


def assign(gt_boxes, gt_labels, pred_boxes=None, scores=None, mask=None, nc=3, topk=10):
    points = grid_points()
    anchors = points.shape[0]
    gt_boxes = torch.tensor(gt_boxes, dtype=torch.float32).view(1, -1, 4)
    gt_labels = torch.tensor(gt_labels, dtype=torch.float32).view(1, -1, 1)
    if mask is None:
        mask = torch.ones_like(gt_labels, dtype=torch.bool)
    if pred_boxes is None:
        # every anchor predicts a 24 px box centred on itself
        pred_boxes = torch.cat((points - 12, points + 12), -1).unsqueeze(0)
    if scores is None:
        scores = torch.full((1, anchors, nc), 0.5)
    assigner = TaskAlignedAssigner(topk=topk, num_classes=nc, alpha=0.5, beta=6.0)
    return points, assigner(scores, pred_boxes, points, gt_labels, gt_boxes, mask)


def test_positives_lie_inside_the_box_and_number_at_most_topk():
    box = [30.0, 20.0, 90.0, 70.0]
    points, (labels, boxes, scores, fg, gt_index) = assign([box], [2])
    chosen = points[fg[0]]
    assert 0 < len(chosen) <= 10
    assert ((chosen[:, 0] > box[0]) & (chosen[:, 0] < box[2]) & (chosen[:, 1] > box[1]) & (chosen[:, 1] < box[3])).all()
    assert (labels[0][fg[0]] == 2).all() and (labels[0][~fg[0]] == 3).all()
    assert torch.equal(boxes[0][fg[0]], torch.tensor([box]).expand(len(chosen), 4))
    assert (scores[0][~fg[0]] == 0).all()
    assert (scores[0][fg[0]][:, [0, 1]] == 0).all() and (scores[0][fg[0]][:, 2] > 0).all()


def test_topk_picks_the_best_aligned_anchors():
    box = [8.0, 8.0, 120.0, 120.0]  # holds 13x13 anchor centres
    points = grid_points()
    scores = torch.full((1, points.shape[0], 3), 0.01)
    inside = anchors_inside_boxes(points, torch.tensor([[box]]))[0, 0]
    favourite = inside.nonzero().view(-1)[:4]
    scores[0, favourite, 1] = 0.9  # these four anchors are far more confident in the right class
    pred = torch.tensor(box).expand(1, points.shape[0], 4).clone()  # all predict the box: same IoU
    _, (_, _, _, fg, _) = assign([box], [1], pred_boxes=pred, scores=scores, topk=4)
    assert set(fg[0].nonzero().view(-1).tolist()) == set(favourite.tolist())


def test_an_anchor_claimed_by_two_boxes_keeps_the_one_it_overlaps_most():
    points = grid_points()
    # a big box and a small box inside it; anchors predict boxes matching the small one
    big, small = [0.0, 0.0, 128.0, 128.0], [40.0, 40.0, 64.0, 64.0]
    pred = torch.tensor(small).expand(1, points.shape[0], 4).clone()
    _, (labels, _, _, fg, gt_index) = assign([big, small], [0, 1], pred_boxes=pred, topk=10)
    in_small = anchors_inside_boxes(points, torch.tensor([[small]]))[0, 0]
    claimed_by_both = fg[0] & in_small
    assert claimed_by_both.any()
    assert (gt_index[0][claimed_by_both] == 1).all() and (labels[0][claimed_by_both] == 1).all()


def test_padding_boxes_are_never_assigned():
    box = [30.0, 20.0, 90.0, 70.0]
    mask = torch.tensor([[[True], [False]]])
    _, (_, _, _, fg, gt_index) = assign([box, box], [0, 1], mask=mask)
    assert fg.any() and (gt_index[0][fg[0]] == 0).all()
    _, (_, _, scores, fg, _) = assign([box], [0], mask=torch.tensor([[[False]]]))
    assert not fg.any() and scores.sum() == 0


def test_no_ground_truth_means_all_background():
    assigner = TaskAlignedAssigner(topk=10, num_classes=4)
    points = grid_points()
    labels, boxes, scores, fg, _ = assigner(torch.rand(2, points.shape[0], 4), torch.rand(2, points.shape[0], 4),
                                            points, torch.zeros(2, 0, 1), torch.zeros(2, 0, 4),
                                            torch.zeros(2, 0, 1, dtype=torch.bool))
    assert not fg.any() and (labels == 4).all() and scores.sum() == 0 and boxes.shape == (2, points.shape[0], 4)


def test_soft_scores_peak_at_the_best_iou():
    box = [24.0, 24.0, 48.0, 48.0]  # exactly the 24 px box predicted by the anchor at (36, 36)
    _, (_, _, scores, fg, _) = assign([box], [0])
    assert torch.isclose(scores[0, :, 0].max(), torch.tensor(1.0), atol=1e-4)
    assert (scores[0, fg[0], 0] <= 1.0 + 1e-6).all()
