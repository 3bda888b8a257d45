"""build_optimizer's kernel: fused where PyTorch has it for the parameters' device, the same update as foreach,
and a checkpointed optimizer state that loads and steps on after a restart."""

from __future__ import annotations

import copy

import pytest
import torch
from trainkit import TINY_CFG


def _model():
    from yolotui.engine.model import build_model

    torch.manual_seed(0)
    return build_model(TINY_CFG, nc=5)


def _foreach_twin(model, name: str):
    from yolotui.engine.train.optim import parameter_groups

    biases, decayed, undecayed = parameter_groups(model)
    if name == "SGD":
        opt = torch.optim.SGD(biases, lr=0.01, momentum=0.937, nesterov=True, foreach=True)
    else:
        opt = torch.optim.AdamW(biases, lr=0.01, betas=(0.937, 0.999), weight_decay=0.0, amsgrad=True, foreach=True)
    opt.add_param_group({"params": decayed, "weight_decay": 5e-4})
    opt.add_param_group({"params": undecayed, "weight_decay": 0.0})
    return opt


def _same_grads(a, b, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    for pa, pb in zip(a.parameters(), b.parameters()):
        grad = torch.randn(pa.shape, generator=g) * 1e-2
        pa.grad, pb.grad = grad.clone(), grad.clone()


@pytest.mark.parametrize("name, tolerance", [("SGD", 0.0), ("AdamW", 1e-6)])
def test_cpu_parameters_get_the_fused_kernel_and_the_foreach_update(name, tolerance):
    from yolotui.engine.train.optim import build_optimizer

    fused_model = _model()
    foreach_model = copy.deepcopy(fused_model)
    fused = build_optimizer(fused_model, name, 0.01, 0.937, 5e-4)
    foreach = _foreach_twin(foreach_model, name)
    assert all(group["fused"] for group in fused.param_groups)
    for step in range(3):
        _same_grads(fused_model, foreach_model, step)
        fused.step()
        foreach.step()
    worst = max((a - b).abs().max().item() for a, b in zip(fused_model.parameters(), foreach_model.parameters()))
    assert worst <= tolerance  # SGD: bit for bit; AdamW: float rounding of its square roots


def test_parameters_without_fused_kernels_fall_back_to_foreach():
    from yolotui.engine.train.optim import _fastest_kernel

    assert _fastest_kernel([torch.nn.Parameter(torch.zeros(2))]) == {"fused": True}
    assert _fastest_kernel([torch.nn.Parameter(torch.zeros(2, device="meta"))]) == {"foreach": True}
    assert _fastest_kernel([]) == {"foreach": True}


def test_a_saved_fused_state_loads_into_a_new_optimizer_and_steps_as_the_uninterrupted_one():
    from yolotui.engine.train.optim import build_optimizer

    straight_model = _model()
    straight = build_optimizer(straight_model, "SGD", 0.01, 0.937, 5e-4)
    _same_grads(straight_model, copy.deepcopy(straight_model), 0)
    straight.step()
    saved_model, saved_state = copy.deepcopy(straight_model), copy.deepcopy(straight.state_dict())

    resumed = build_optimizer(saved_model, "SGD", 0.01, 0.937, 5e-4)
    resumed.load_state_dict(saved_state)
    for step in (1, 2):
        _same_grads(straight_model, saved_model, step)
        straight.step()
        resumed.step()
    assert all(torch.equal(a, b) for a, b in zip(straight_model.parameters(), saved_model.parameters()))
