"""Learning-rate schedules and warmup as pure functions of (epoch, iteration), so resume needs no scheduler object.

The schedule is a factor of lr0 per epoch: linear from 1 to lrf, cosine (one cycle), flat-cosine (flat for the
first half, then cosine) or fixed. Warmup interpolates per iteration over the first `warmup_iters` batches:
the bias group falls from warmup_bias_lr, the other groups rise from 0, SGD momentum rises from warmup_momentum
(Adam's beta1 stays at `momentum`, as officially).

Extending a run to N epochs re-plans the schedule: the factor is computed as if N epochs had been planned from
the start, and training continues at the current epoch on that curve (see `LrPlan.extended`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

KINDS = ("linear", "cos", "flat_cos", "fixed")
WARMUP_MIN_ITERS = 100


def schedule_kind(opt: dict[str, Any]) -> str:
    """The schedule the official flags select."""
    if opt.get("cos_lr"):
        return "cos"
    if opt.get("flat_cos_lr"):
        return "flat_cos"
    if opt.get("fixed_lr"):
        return "fixed"
    return "linear"


@dataclass
class LrPlan:
    """Everything the schedule depends on; saved in checkpoints as a plain dict."""

    kind: str
    lrf: float
    epochs: int
    warmup_iters: int
    warmup_bias_lr: float
    warmup_momentum: float
    momentum: float

    def factor(self, epoch: int) -> float:
        """lr / lr0 during `epoch` (0-based) after warmup."""
        x, steps, lrf = float(epoch), self.epochs, self.lrf
        if self.kind == "cos":
            return ((1 - math.cos(x * math.pi / steps)) / 2) * (lrf - 1.0) + 1.0
        if self.kind == "flat_cos":
            half = steps // 2
            if x <= half or half == 0:
                return 1.0
            return ((1 - math.cos((x - half) * math.pi / half)) / 2) * (lrf - 1.0) + 1.0
        if self.kind == "fixed":
            return 1.0
        return (1 - x / steps) * (1.0 - lrf) + lrf

    def epoch_factor(self, epoch: int, epoch_start: int) -> float:
        """lr / lr0 after warmup during `epoch`, whose first batch is global iteration `epoch_start`.

        As in the official trainer, whose LambdaLR is stepped at each epoch's end after `last_epoch` was set
        back by one: epoch e trains at the factor of epoch e-1, except epoch 0 and the epoch in which warmup
        ends (warmup's last value, the factor of that epoch, holds until the epoch ends).
        """
        if epoch == 0 or (self.warmup_iters > 0 and epoch_start <= self.warmup_iters):
            return self.factor(epoch)
        return self.factor(epoch - 1)

    def apply(self, optimizer: Any, epoch: int, iteration: int, lr0: float, epoch_start: int | None = None) -> None:
        """Set every group's lr (and momentum) for global iteration `iteration` of `epoch` (whose first batch is
        global iteration `epoch_start`; None for `iteration`'s own epoch start unknown: no lag is applied)."""
        warming = iteration <= self.warmup_iters and self.warmup_iters > 0
        if warming or epoch_start is None:
            base = lr0 * self.factor(epoch)
        else:
            base = lr0 * self.epoch_factor(epoch, epoch_start)
        for j, group in enumerate(optimizer.param_groups):
            if warming:
                start = self.warmup_bias_lr if j == 0 else 0.0
                group["lr"] = float(np.interp(iteration, [0, self.warmup_iters], [start, base]))
            else:
                group["lr"] = base
            if "momentum" in group:
                group["momentum"] = (
                    float(np.interp(iteration, [0, self.warmup_iters], [self.warmup_momentum, self.momentum]))
                    if warming else self.momentum
                )
            elif "betas" in group:  # as the official trainer: Adam's beta1 is the momentum, not warmed up
                group["betas"] = (self.momentum, group["betas"][1])

    def extended(self, epochs: int) -> LrPlan:
        """The same schedule re-planned for `epochs` in total (continuing at the current epoch)."""
        return LrPlan(**{**asdict(self), "epochs": int(epochs)})

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for the checkpoint."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LrPlan:
        """Inverse of to_dict."""
        return cls(**{k: data[k] for k in cls.__dataclass_fields__})


def warmup_iterations(warmup_epochs: float, batches_per_epoch: int, minimum: int = WARMUP_MIN_ITERS) -> int:
    """Warmup length in batches: max(warmup_epochs x batches, minimum), the minimum 100 as officially (hyp key
    `warmup_min_iters` changes it: a short run on a small data set would otherwise warm up for many epochs);
    0 when warmup_epochs is 0."""
    if warmup_epochs <= 0:
        return 0
    return max(round(warmup_epochs * batches_per_epoch), int(minimum), 1)


def warmup_accumulation(iteration: int, warmup_iters: int, accumulate: int) -> int:
    """Accumulation ramps from 1 to its full value during warmup."""
    if warmup_iters <= 0 or iteration > warmup_iters:
        return accumulate
    return max(1, int(np.interp(iteration, [0, warmup_iters], [1, accumulate]).round()))


def make_plan(opt: dict[str, Any], hyp: dict[str, Any], epochs: int, batches_per_epoch: int) -> LrPlan:
    """The plan for a fresh run."""
    return LrPlan(
        kind=schedule_kind(opt),
        lrf=float(hyp["lrf"]),
        epochs=int(epochs),
        warmup_iters=warmup_iterations(float(hyp["warmup_epochs"]), batches_per_epoch,
                                       int(hyp.get("warmup_min_iters", WARMUP_MIN_ITERS))),
        warmup_bias_lr=float(hyp["warmup_bias_lr"]),
        warmup_momentum=float(hyp["warmup_momentum"]),
        momentum=float(hyp["momentum"]),
    )
