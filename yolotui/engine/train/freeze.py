"""A freeze that freezes: frozen layers stay bit-identical through a fine-tune.

`requires_grad=False` alone keeps a frozen layer's weights, but not its BatchNorm running statistics: in train
mode every forward pass moves them (yolov9#589, ultralytics#9391), the EMA copy follows them, and the EMA's
BatchNorm recalibration before validation recomputes them. So, for the layers under the frozen prefixes:

- `hold_frozen_bn` puts their BatchNorm modules in eval mode (call it after every `model.train()`): they
  normalise with their stored statistics and never update them;
- `frozen_state_keys` names their state-dict entries, which the EMA copies exactly instead of averaging
  (v * d + v * (1 - d) is not always v in floating point) and the recalibration leaves alone.
"""

from __future__ import annotations

from torch import nn


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any((name + ".").startswith(p) for p in prefixes)


def frozen_bn_modules(model: nn.Module, prefixes: list[str] | tuple[str, ...]) -> list[nn.Module]:
    """The BatchNorm modules of `model` (unwrapped) under the frozen parameter-name prefixes."""
    prefixes = tuple(prefixes)
    if not prefixes:
        return []
    return [m for name, m in model.named_modules()
            if isinstance(m, nn.modules.batchnorm._BatchNorm) and _under(name, prefixes)]


def hold_frozen_bn(model: nn.Module, prefixes: list[str] | tuple[str, ...]) -> int:
    """Put the frozen BatchNorm modules in eval mode; returns how many."""
    modules = frozen_bn_modules(model, prefixes)
    for module in modules:
        module.eval()
    return len(modules)


def frozen_state_keys(model: nn.Module, prefixes: list[str] | tuple[str, ...]) -> frozenset[str]:
    """State-dict keys (parameters and buffers) of `model` (unwrapped) under the frozen prefixes."""
    prefixes = tuple(prefixes)
    if not prefixes:
        return frozenset()
    return frozenset(k for k in model.state_dict() if k.startswith(prefixes))
