"""The EMA update (yolotui/engine/train/ema.py): the official formula, with fused foreach calls and cached locations."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from yolotui.engine.train.ema import ModelEMA


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.SiLU(), nn.Conv2d(4, 2, 1))


def _reference(ema: dict, model: dict, d: float) -> dict:
    """The per-tensor update the official trainer makes: v = d * v + (1 - d) * model, integers copied."""
    out = {}
    for name, value in ema.items():
        out[name] = value * d + (1 - d) * model[name] if value.dtype.is_floating_point else model[name].clone()
    return out


def _step(model: nn.Module) -> None:
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.1)
    model.train()
    model(torch.randn(2, 3, 8, 8))  # moves BatchNorm's running statistics and its counter


def test_update_matches_the_official_formula_over_many_steps():
    model = _model()
    ema = ModelEMA(model, tau=3.0)
    expected = {k: v.clone() for k, v in ema.ema.state_dict().items()}
    for _ in range(5):
        _step(model)
        ema.update(model)
        expected = _reference(expected, model.state_dict(), ema.decay(ema.updates))
    got = ema.ema.state_dict()
    for name, value in expected.items():
        assert torch.allclose(got[name].float(), value.float(), rtol=1e-5, atol=1e-6), name
    assert int(got["1.num_batches_tracked"]) == 5


def test_a_replaced_buffer_is_followed_and_frozen_keys_are_left_alone():
    model = _model()
    ema = ModelEMA(model, tau=1.0)
    ema.update(model)  # locations cached
    model[1].running_mean = torch.full((4,), 3.0)  # a new tensor object in the buffer dict, as `.to()` makes
    ema.frozen = frozenset({"0.weight"})
    before = ema.ema.state_dict()["0.weight"].clone()
    with torch.no_grad():
        model[0].weight.add_(1.0)
    ema.update(model)
    d = ema.decay(ema.updates)
    assert torch.allclose(ema.ema[1].running_mean, torch.full((4,), 3.0) * (1 - d), atol=1e-6)
    assert torch.equal(ema.ema.state_dict()["0.weight"], before)


def test_a_new_source_model_is_read_afresh():
    first, second = _model(), _model()
    with torch.no_grad():
        for param in second.parameters():
            param.fill_(2.0)
    ema = ModelEMA(first, tau=1.0)
    ema.update(first)
    snapshot = copy.deepcopy(ema.ema.state_dict())
    ema.update(second)
    d = ema.decay(ema.updates)
    assert ema.ema[3].bias.detach() == pytest.approx(
        (snapshot["3.bias"] * d + 2.0 * (1 - d)).tolist(), rel=1e-5)
