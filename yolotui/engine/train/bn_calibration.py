"""BatchNorm recalibration: running statistics recomputed for the weights a model has now ("precise BN").

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

from collections.abc import Iterable

import torch
from torch import nn


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
