"""YoloLoss: shapes, gradients, dual heads, empty targets, gains, and that matching predictions score lower."""

from __future__ import annotations

import math

import pytest
import torch

from yolotui.engine.loss.yolo_loss import YoloLoss

torch.set_num_threads(1)

NC = 3
REG_MAX = 16
STRIDES = (8, 16, 32)
IMG = 64  # grids 8x8, 4x4, 2x2


def random_maps(batch: int = 2, seed: int = 0, requires_grad: bool = True) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, 4 * REG_MAX + NC, IMG // s, IMG // s, generator=gen).requires_grad_(requires_grad)
            for s in STRIDES]


TARGETS = torch.tensor([
    [0, 1, 0.50, 0.50, 0.40, 0.50],
    [0, 2, 0.20, 0.25, 0.20, 0.20],
    [1, 0, 0.60, 0.55, 0.50, 0.60],
])


def matching_maps(targets: torch.Tensor, batch: int) -> list[torch.Tensor]:
    """Maps whose decoded boxes equal the target box at every anchor inside it, with a confident class there
    and confident background everywhere else."""
    maps = []
    for stride in STRIDES:
        size = IMG // stride
        out = torch.zeros(batch, 4 * REG_MAX + NC, size, size)
        out[:, 4 * REG_MAX:] = -12.0
        centres = (torch.arange(size) + 0.5) * stride
        for b, cls, cx, cy, w, h in targets.tolist():
            x1, y1, x2, y2 = (cx - w / 2) * IMG, (cy - h / 2) * IMG, (cx + w / 2) * IMG, (cy + h / 2) * IMG
            for gy, py in enumerate(centres.tolist()):
                for gx, px in enumerate(centres.tolist()):
                    if not (x1 < px < x2 and y1 < py < y2):
                        continue
                    dists = [(px - x1) / stride, (py - y1) / stride, (x2 - px) / stride, (y2 - py) / stride]
                    if max(dists) > REG_MAX - 1.01:
                        continue
                    for side, d in enumerate(dists):
                        # Two-bin distribution whose expectation is exactly d.
                        left = int(math.floor(d))
                        right = min(left + 1, REG_MAX - 1)
                        p_right = d - left
                        probs = torch.full((REG_MAX,), 1e-6)
                        probs[left] += 1 - p_right
                        probs[right] += p_right
                        out[int(b), side * REG_MAX:(side + 1) * REG_MAX, gy, gx] = probs.log()
                    out[int(b), 4 * REG_MAX + int(cls), gy, gx] = 12.0
        maps.append(out.requires_grad_(True))
    return maps


def test_single_head_shapes_and_gradients():
    loss_fn = YoloLoss(NC, STRIDES)
    maps = random_maps()
    loss, items = loss_fn(maps, TARGETS)
    assert loss.dim() == 0 and items.shape == (3,)
    assert not items.requires_grad
    assert torch.isfinite(loss) and (items > 0).all()
    # loss is the gained sum times the batch size, as the official dual loss returns it
    assert loss.item() == pytest.approx(items.sum().item() * 2, rel=1e-5)
    loss.backward()
    for m in maps:
        assert m.grad is not None and torch.isfinite(m.grad).all()
        assert m.grad.abs().sum() > 0


def test_dual_head_weights_aux_by_a_quarter_and_trains_both_branches():
    loss_fn = YoloLoss(NC, STRIDES)
    main = random_maps(seed=1)
    _, single_items = loss_fn(main, TARGETS)
    aux = [m.detach().clone().requires_grad_(True) for m in main]
    loss, dual_items = loss_fn([aux, main], TARGETS)
    assert torch.allclose(dual_items, single_items * 1.25, rtol=1e-5)
    loss.backward()
    assert all(m.grad.abs().sum() > 0 for m in aux)
    assert all(m.grad.abs().sum() > 0 for m in main)
    # the aux branch's gradient is a quarter of the main branch's for identical maps
    assert torch.allclose(aux[0].grad, main[0].grad * 0.25, atol=1e-6)


def test_eval_mode_pair_is_accepted():
    loss_fn = YoloLoss(NC, STRIDES)
    maps = random_maps(requires_grad=False)
    decoded = torch.zeros(2, 4 + NC, 84)
    _, items_pair = loss_fn((decoded, maps), TARGETS)
    _, items = loss_fn(maps, TARGETS)
    assert torch.equal(items_pair, items)


def test_empty_targets_are_sane():
    loss_fn = YoloLoss(NC, STRIDES)
    maps = random_maps()
    loss, items = loss_fn(maps, torch.zeros(0, 6))
    assert torch.isfinite(loss)
    assert items[0] == 0 and items[2] == 0 and items[1] > 0
    loss.backward()
    assert all(torch.isfinite(m.grad).all() for m in maps)


def test_images_without_boxes_in_a_batch():
    loss_fn = YoloLoss(NC, STRIDES)
    maps = random_maps(batch=4)
    targets = TARGETS[TARGETS[:, 0] == 0]  # only image 0 has boxes; images 1..3 are empty
    loss, items = loss_fn(maps, targets)
    assert torch.isfinite(loss) and (items > 0).all()
    loss.backward()
    assert all(torch.isfinite(m.grad).all() for m in maps)


def test_matching_predictions_score_lower_than_random():
    loss_fn = YoloLoss(NC, STRIDES)
    good_loss, good_items = loss_fn(matching_maps(TARGETS, 2), TARGETS)
    for seed in range(3):
        random_loss, random_items = loss_fn(random_maps(seed=seed), TARGETS)
        assert good_loss < random_loss * 0.2
        assert (good_items < random_items).all()
    assert good_items[0] < 0.05  # boxes decode exactly: CIoU loss near zero


def test_gradient_descent_on_free_maps_reduces_loss():
    loss_fn = YoloLoss(NC, STRIDES)
    maps = random_maps(seed=3)
    optimizer = torch.optim.Adam(maps, lr=0.1)
    first = None
    for _ in range(30):
        optimizer.zero_grad()
        loss, _ = loss_fn(maps, TARGETS)
        first = loss.item() if first is None else first
        loss.backward()
        optimizer.step()
    assert loss_fn(maps, TARGETS)[0].item() < 0.5 * first


def test_gains_come_from_hyp():
    maps = random_maps(requires_grad=False)
    _, default = YoloLoss(NC, STRIDES)(maps, TARGETS)
    _, custom = YoloLoss(NC, STRIDES, hyp={"box": 1.0, "cls": 1.0, "dfl": 0.0, "lr0": 0.01})(maps, TARGETS)
    assert custom[2] == 0
    assert custom[0] == pytest.approx(default[0].item() / 7.5, rel=1e-5)
    assert custom[1] == pytest.approx(default[1].item() / 0.5, rel=1e-5)


def test_label_smoothing_raises_loss_of_confident_correct_predictions():
    maps = matching_maps(TARGETS, 2)
    _, plain = YoloLoss(NC, STRIDES)(maps, TARGETS)
    _, smoothed = YoloLoss(NC, STRIDES, label_smoothing=0.1)(maps, TARGETS)
    _, from_hyp = YoloLoss(NC, STRIDES, hyp={"label_smoothing": 0.1})(maps, TARGETS)
    assert smoothed[1] > plain[1] * 1.5
    assert torch.equal(smoothed, from_hyp)
    assert torch.equal(smoothed[[0, 2]], plain[[0, 2]])


def test_half_precision_maps_give_float32_loss():
    loss_fn = YoloLoss(NC, STRIDES)
    maps = [m.detach().half() for m in random_maps()]
    loss, items = loss_fn(maps, TARGETS)
    assert loss.dtype == torch.float32 and torch.isfinite(loss)


def test_targets_on_a_non_square_input():
    loss_fn = YoloLoss(NC, STRIDES)
    maps = [torch.randn(1, 4 * REG_MAX + NC, 64 // s, 96 // s, requires_grad=True) for s in STRIDES]
    targets = torch.tensor([[0, 0, 0.8, 0.5, 0.2, 0.5]])  # right part of a 96x64 image
    loss, items = loss_fn(maps, targets)
    assert torch.isfinite(loss) and items[0] > 0


@pytest.mark.parametrize("config", ["gelan-t", "yolov9-t"])
def test_loss_on_a_real_tiny_model(config):
    from yolotui.engine.model import build_model, narrow_config
    from yolotui.engine.model.builder import load_model_yaml

    torch.manual_seed(0)
    cfg, _ = load_model_yaml(config)
    model = build_model(narrow_config(cfg, 0.25), nc=NC).train()
    loss_fn = YoloLoss(model.nc, model.stride, reg_max=model.reg_max)
    images = torch.rand(2, 3, IMG, IMG)
    preds = model(images)
    dual = isinstance(preds[0], (list, tuple))
    assert dual == (config == "yolov9-t")
    loss, items = loss_fn(preds, TARGETS)
    assert torch.isfinite(loss) and (items > 0).all()
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    # eval mode hands back (decoded, maps); the loss reads the maps, as validation does
    model.eval()
    with torch.no_grad():
        _, eval_items = loss_fn(model(images), TARGETS)
    assert torch.isfinite(eval_items).all()
