"""Exponential moving average of a model's weights (decay 0.9999 ramped in with tau 2000 updates)."""

from __future__ import annotations

import copy
import math

import torch
from torch import nn


class ModelEMA:
    """Keeps `ema`, a frozen copy of the model whose float tensors follow the model's as a moving average."""

    def __init__(self, model: nn.Module, decay: float = 0.9999, tau: float = 2000.0, updates: int = 0) -> None:
        self.ema = copy.deepcopy(unwrap(model)).eval()
        self.updates = updates
        self.decay_max = decay
        self.tau = tau
        self.frozen: frozenset[str] = frozenset()  # state-dict keys of frozen layers: copied, never averaged
        for param in self.ema.parameters():
            param.requires_grad_(False)

    def decay(self, updates: int) -> float:
        """Effective decay after `updates` updates: small at first so early weights are not frozen in."""
        return self.decay_max * (1 - math.exp(-updates / self.tau))

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """Move the average one step towards `model`."""
        self.updates += 1
        d = self.decay(self.updates)
        source = unwrap(model).state_dict()
        for name, value in self.ema.state_dict().items():
            if name in self.frozen:
                continue  # a frozen layer's EMA is its (unchanging) value: averaging would round it
            if value.dtype.is_floating_point:
                value.mul_(d).add_(source[name].detach(), alpha=1 - d)
            else:
                value.copy_(source[name])


def unwrap(model: nn.Module) -> nn.Module:
    """The plain model inside DistributedDataParallel / DataParallel wrappers."""
    return model.module if hasattr(model, "module") and isinstance(model.module, nn.Module) else model
