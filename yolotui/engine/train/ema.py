"""Exponential moving average of a model's weights (decay 0.9999 ramped in with tau 2000 updates).

Also: BatchNorm recalibration: running statistics recomputed for the weights a model has now ("precise BN").

Why: BatchNorm's running mean and variance are moving averages (momentum 0.03, so over roughly the last 33
batches) of statistics computed with *earlier* weights. Early in training, and all through a short run on a small
data set (128 images at batch 16 are 8 batches an epoch), the weights change faster than that average follows,
so in eval mode every layer normalises with a variance that is too small for its current input, the error
compounds through the ~60 BatchNorm layers of a tiny model, and validation sees logits in the thousands: measured
on the demo data, val cls loss 89,000 while the train cls loss was 4, and mAP50 0.004 where recalibrated
statistics give 0.036 for the same weights (see bench/bench_convergence.py).

`recalibrate_bn(model, batches)` resets every BatchNorm's statistics and accumulates an exact (cumulative)
average over the given batches, in train mode without gradients, then restores each layer's momentum and the
model's mode. The trainer runs it on the EMA model before each validation, with a fixed number of training
images drawn as a pure function of (seed, epoch), so it is deterministic and exact resume is unaffected.
"""
from __future__ import annotations

import copy
import math
from collections.abc import Iterable

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
        self._cache: dict | None = None  # where the tensors of the EMA and of its source live: see _pairs
        for param in self.ema.parameters():
            param.requires_grad_(False)

    def decay(self, updates: int) -> float:
        """Effective decay after `updates` updates: small at first so early weights are not frozen in."""
        return self.decay_max * (1 - math.exp(-updates / self.tau))

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """Move the average one step towards `model`: ema = d * ema + (1 - d) * model for float tensors (one
        fused foreach lerp per dtype and device instead of two kernels per tensor), a copy for integer ones."""
        self.updates += 1
        d = self.decay(self.updates)
        averaged, mixed, copied = self._pairs(unwrap(model))
        for ours, theirs in averaged:
            torch._foreach_lerp_(ours, theirs, 1 - d)  # ema + (1 - d)(model - ema): one pass over the weights
        for ours, theirs in mixed:  # a float tensor of another dtype or device than its average (rare)
            ours.lerp_(theirs.to(ours.device, ours.dtype), 1 - d)
        if copied:
            torch._foreach_copy_([ours for ours, _ in copied], [theirs for _, theirs in copied])

    def _pairs(self, source: nn.Module) -> tuple[list[tuple[list, list]], list[tuple], list[tuple]]:
        """(EMA tensors, model tensors): float ones grouped by dtype and device, float pairs whose dtype or device
        differ, and the rest (integer counters) to copy.

        Where each tensor lives (its module's parameter or buffer dict and key) is found once per source model
        (walking the modules costs ~15 ms for gelan-t on a CPU); the tensors are looked up there on every call and
        the grouping is redone only when one of them was replaced (a buffer after `.to()`, say)."""
        if self._cache is None or self._cache["source"] is not source or self._cache["frozen"] != self.frozen:
            ours, theirs = _slots(self.ema), _slots(source)
            names = [name for name in ours if name not in self.frozen]
            self._cache = {"source": source, "frozen": self.frozen, "slots": [ours[n] + theirs[n] for n in names],
                           "tensors": None, "groups": None}
        cache = self._cache
        tensors = [(a[k], b[j]) for a, k, b, j in cache["slots"]]
        if cache["tensors"] is None or any(x is not y or u is not v
                                           for (x, u), (y, v) in zip(tensors, cache["tensors"])):
            cache["tensors"], cache["groups"] = tensors, _group(tensors)
        return cache["groups"]


def _group(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[list[tuple[list, list]], list[tuple], list[tuple]]:
    """Split (average, source) pairs into foreach groups by dtype and device, mismatched float pairs and copies."""
    averaged: dict[tuple, tuple[list, list]] = {}
    mixed: list[tuple] = []
    copied: list[tuple] = []
    for value, other in pairs:
        if not value.dtype.is_floating_point:
            copied.append((value, other))
        elif other.dtype == value.dtype and other.device == value.device:
            group = averaged.setdefault((value.dtype, value.device), ([], []))
            group[0].append(value)
            group[1].append(other)
        else:
            mixed.append((value, other))
    return list(averaged.values()), mixed, copied


def _slots(model: nn.Module) -> dict[str, tuple[dict, str]]:
    """State-dict name -> (the dict holding the tensor, its key) for every parameter and persistent buffer."""
    slots: dict[str, tuple[dict, str]] = {}
    for prefix, module in model.named_modules():
        dot = f"{prefix}." if prefix else ""
        for key, param in module._parameters.items():
            if param is not None:
                slots[dot + key] = (module._parameters, key)
        for key, buffer in module._buffers.items():
            if buffer is not None and key not in module._non_persistent_buffers_set:
                slots[dot + key] = (module._buffers, key)
    return slots


def unwrap(model: nn.Module) -> nn.Module:
    """The plain model inside DistributedDataParallel / DataParallel wrappers."""
    return model.module if hasattr(model, "module") and isinstance(model.module, nn.Module) else model


def batch_norm_layers(model: nn.Module, keep: tuple[str, ...] = ()) -> list[nn.modules.batchnorm._BatchNorm]:
    """The model's BatchNorm layers (any dimensionality) that track running statistics, except those under the
    module-name prefixes `keep` (frozen layers)."""
    return [m for name, m in model.named_modules()
            if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats
            and not any((name + ".").startswith(p) for p in keep)]


@torch.no_grad()
def recalibrate_bn(model: nn.Module, batches: Iterable[torch.Tensor], device: torch.device | str = "cpu",
                   keep: tuple[str, ...] = ()) -> int:
    """Recompute the running statistics of every BatchNorm in `model` from `batches` (float images, [B, 3, H, W],
    already scaled to 0..1, or uint8 0..255); returns the number of images seen (0: statistics untouched).

    An error during the pass (BatchNorm refuses a single value per channel) restores the old statistics, then
    propagates. BatchNorm layers under the module-name prefixes `keep` (frozen layers) are left as they are, in
    eval mode during the pass."""
    from yolotui.engine.train.freeze import hold_frozen_bn

    layers = batch_norm_layers(model, tuple(keep))
    if not layers:
        return 0
    saved = [(m, m.momentum, m.running_mean.clone(), m.running_var.clone(), m.num_batches_tracked.clone())
             for m in layers]
    was_training = model.training
    param = next(model.parameters(), None)
    dtype = param.dtype if param is not None and param.dtype.is_floating_point else torch.float32
    seen = 0
    try:
        for m in layers:
            m.reset_running_stats()
            m.momentum = None  # cumulative average over the batches below
        model.train()
        hold_frozen_bn(model, tuple(keep))
        for images in batches:
            images = images.to(device, non_blocking=True)
            images = images.to(dtype) / 255.0 if images.dtype == torch.uint8 else images.to(dtype)
            model(images)
            seen += int(images.shape[0])
    except BaseException:
        seen = 0  # a failed pass (e.g. one value per channel) leaves the statistics as they were
        raise
    finally:
        for m, momentum, mean, var, tracked in saved:
            m.momentum = momentum
            if seen == 0:
                m.running_mean.copy_(mean)
                m.running_var.copy_(var)
                m.num_batches_tracked.copy_(tracked)
        model.train(was_training)
    return seen
