"""results.csv dialects: ultralytics' header read under the official names every reader uses.

ultralytics writes `epoch,time,train/box_loss,...,metrics/mAP50-95(B),...,lr/pg0,...` with the epoch counted
from 1; the official trainer (and yolotui's engine) write `epoch,train/box_loss,...,metrics/mAP_0.5:0.95,...,
x/lr0,...` counted from 0. `official_names` maps the first onto the second, so results.csv of an ultralytics run
is charted, listed and compared like any other, and never rewritten.
"""

from __future__ import annotations

ULTRALYTICS_NAMES = {
    "metrics/precision(B)": "metrics/precision",
    "metrics/recall(B)": "metrics/recall",
    "metrics/mAP50(B)": "metrics/mAP_0.5",
    "metrics/mAP50-95(B)": "metrics/mAP_0.5:0.95",
    "lr/pg0": "x/lr0",
    "lr/pg1": "x/lr1",
    "lr/pg2": "x/lr2",
}


def is_ultralytics(names: list[str]) -> bool:
    """True for ultralytics' header (its `time` column, or a `(B)` box metric)."""
    return "time" in names or any(name.endswith("(B)") for name in names)


def official_names(names: list[str]) -> tuple[list[str], int]:
    """(the header under the official names, what to add to its epoch column to count from 0)."""
    if not is_ultralytics(names):
        return names, 0
    return [ULTRALYTICS_NAMES.get(name, name) for name in names], -1
