"""The hyperparameter recipe a new run gets when --hyp is not given, chosen by how many optimizer steps it makes.

The official recipe (hyp.scratch-high.yaml: nominal batch 64 by gradient accumulation, three warmup epochs of
at least 100 iterations, mosaic + mixup + copy-paste, scale 0.9) is tuned for hundreds of thousands of
optimizer steps on COCO. A run on a small data set for a few dozen epochs makes a few dozen steps instead
(30 epochs of 128 images: 60 steps), most of them still warming up, under augmentation it has no time to
absorb; it barely learns. Such runs get the short-run recipe instead: hyp.short-run.yaml, the AdamW
optimizer and mosaic off for the last half of the epochs (at most 15), each unless the command line gives it.

The rule counts the optimizer steps the official recipe would make: epochs x training images / 64. Under
SHORT_RUN_MAX_STEPS it is a short run. The choice is written to opt.yaml (`hyp:` names the file) and said
in the launch output; `--hyp FILE` always wins, so `--hyp hyp.scratch-high.yaml` gives the official recipe to
any run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

OFFICIAL_HYP = "hyp.scratch-high.yaml"
SHORT_RUN_HYP = "hyp.short-run.yaml"
NOMINAL_BATCH = 64  # the official trainer's images per optimizer step
SHORT_RUN_MAX_STEPS = 1000


@dataclass(frozen=True)
class RecipeChoice:
    """The shipped hyperparameter file chosen for a run, and why (one line for the launch output)."""

    hyp: str
    steps: int
    reason: str
    opt_defaults: dict = field(default_factory=dict)  # options the recipe sets when the command line does not


def short_run_options(epochs: int) -> dict:
    """The short-run recipe's options beside its hyp file: AdamW, and mosaic off for the last half of the epochs
    (at most 15, the official README's value, at least 1) so the last epochs see whole images as validation does
    (30 epochs of 128 shapes: mAP50-95 0.403 with 15, 0.371 with 10; bench/bench_convergence.py)."""
    return {"optimizer": "AdamW", "close_mosaic": min(15, max(1, int(epochs) // 2))}


def planned_steps(epochs: int, train_images: int) -> int:
    """Optimizer steps the official recipe would make: every epoch's images over the nominal batch of 64."""
    return math.ceil(max(int(epochs), 0) * max(int(train_images), 0) / NOMINAL_BATCH)


def choose_recipe(epochs: int, train_images: int) -> RecipeChoice:
    """The short-run recipe under SHORT_RUN_MAX_STEPS planned optimizer steps, else the official one."""
    steps = planned_steps(epochs, train_images)
    sums = f"{epochs} epochs x {train_images} training images / {NOMINAL_BATCH} = {steps} optimizer steps"
    if steps < SHORT_RUN_MAX_STEPS:
        return RecipeChoice(SHORT_RUN_HYP, steps, f"hyperparameters {SHORT_RUN_HYP}, the short-run recipe: {sums}, "
                                                  f"under {SHORT_RUN_MAX_STEPS} (--hyp {OFFICIAL_HYP} for the "
                                                  "official one)", short_run_options(epochs))
    return RecipeChoice(OFFICIAL_HYP, steps, f"hyperparameters {OFFICIAL_HYP}, the official recipe: {sums}")
