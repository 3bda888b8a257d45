"""The sparse loss (CIoU and decoding only where the assigner and the box terms read them, candidates shared by
both branches) equals the dense formulation: same losses, same positives, same gradients."""

from __future__ import annotations

import pytest
import torch
from _loss_dense_reference import dense_loss

from yolotui.engine.loss.yolo_loss import YoloLoss

torch.set_num_threads(1)

NC, REG_MAX, STRIDES, IMG = 4, 16, (8, 16, 32), 128


def _maps(batch: int, seed: int, channels_last: bool) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    maps = []
    for s in STRIDES:
        m = torch.randn(batch, 4 * REG_MAX + NC, IMG // s, IMG // s, generator=gen) * 2
        if channels_last:
            m = m.contiguous(memory_format=torch.channels_last)
        maps.append(m.requires_grad_(True))
    return maps


def _targets(batch: int, seed: int) -> torch.Tensor:
    """Random boxes, some images crowded (overlapping boxes claim the same anchors), one image empty."""
    gen = torch.Generator().manual_seed(seed + 100)
    rows = []
    for b in range(batch - 1):
        for _ in range(int(torch.randint(1, 7, (1,), generator=gen))):
            cx, cy = (torch.rand(2, generator=gen) * 0.8 + 0.1).tolist()
            w, h = (torch.rand(2, generator=gen) * 0.6 + 0.05).tolist()
            rows.append([b, int(torch.randint(0, NC, (1,), generator=gen)), cx, cy, w, h])
    return torch.tensor(rows, dtype=torch.float32)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("dual", [False, True])
@pytest.mark.parametrize("channels_last", [False, True])
def test_sparse_loss_equals_dense_reference(seed, dual, channels_last):
    loss_fn = YoloLoss(NC, STRIDES, hyp={"box": 7.5, "cls": 0.5, "dfl": 1.5})
    batch = 4
    main = _maps(batch, seed, channels_last)
    aux = _maps(batch, seed + 10, channels_last) if dual else None
    preds = [aux, main] if dual else main
    targets = _targets(batch, seed)

    loss, items = loss_fn(preds, targets)
    grads = torch.autograd.grad(loss, [*main, *(aux or [])])
    ref_loss, ref_items, _ = dense_loss(loss_fn, preds, targets)
    ref_grads = torch.autograd.grad(ref_loss, [*main, *(aux or [])])

    assert items[0] > 0 and items[2] > 0  # positives were found: the box and DFL terms are compared too
    assert torch.allclose(items, ref_items, rtol=1e-5, atol=1e-7), (items, ref_items)
    assert torch.allclose(loss, ref_loss, rtol=1e-5)
    for ours, theirs in zip(grads, ref_grads):
        assert torch.allclose(ours, theirs, rtol=1e-4, atol=1e-7)


def test_assignment_positives_equal_dense_reference():
    """The assigner's positives and soft scores match the dense formulation pair for pair."""
    from _loss_dense_reference import dense_assign

    from yolotui.engine.loss.assigner import TaskAlignedAssigner

    gen = torch.Generator().manual_seed(5)
    points = (torch.stack(torch.meshgrid(torch.arange(16.0), torch.arange(16.0), indexing="xy"), -1)
              .view(-1, 2) + 0.5) * 8
    boxes = torch.tensor([[[10.0, 10.0, 90.0, 70.0], [40.0, 30.0, 120.0, 120.0], [0.0, 0.0, 0.0, 0.0]],
                          [[5.0, 60.0, 50.0, 125.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]])
    labels = torch.tensor([[[1.0], [2.0], [0.0]], [[0.0], [0.0], [0.0]]])
    mask = torch.tensor([[[True], [True], [False]], [[True], [False], [False]]])
    scores = torch.rand(2, 256, 3, generator=gen)
    centre = points.unsqueeze(0).expand(2, -1, -1)
    size = torch.rand(2, 256, 2, generator=gen) * 40 + 8
    pred = torch.cat((centre - size / 2, centre + size / 2), -1)
    _, target_boxes, target_scores, fg, _ = TaskAlignedAssigner(10, 3)(scores, pred, points, labels, boxes, mask)
    ref_boxes, ref_scores, ref_fg = dense_assign(3, 10, 0.5, 6.0, scores, pred, points, labels, boxes, mask)
    assert fg.sum() > 10 and torch.equal(fg, ref_fg)
    assert torch.equal(target_boxes[fg], ref_boxes[fg])
    assert torch.allclose(target_scores, ref_scores, rtol=1e-5, atol=1e-7)


def test_box_reductions_match_torch():
    """The fast reductions over the box dimension give what any / argmax give, ties and all-false included."""
    from yolotui.engine.loss.assigner import any_over_boxes, argmax_over_boxes, first_true_over_boxes

    gen = torch.Generator().manual_seed(3)
    mask = torch.rand(3, 7, 50, generator=gen) > 0.8
    mask[0, :, :5] = False  # anchors no box claims
    values = torch.randint(0, 4, (3, 7, 50), generator=gen).float()  # many ties
    assert torch.equal(any_over_boxes(mask), mask.any(dim=1))
    assert torch.equal(first_true_over_boxes(mask), mask.float().argmax(dim=1))
    assert torch.equal(argmax_over_boxes(values), values.argmax(dim=1))
