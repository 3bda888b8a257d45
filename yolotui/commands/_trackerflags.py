"""The experiment-tracker flags of the commands that start engine training (train, finetune, resume).

`--no-tensorboard` (TensorBoard is on by default), `--mlflow [URI]` (a local file store beside the run folders
when no URI is given, or MLFLOW_TRACKING_URI), `--wandb PROJECT` (WANDB_MODE=offline honoured). Given on a
resume they replace only their own setting; the tracker run ids are kept (yolotui.runs.trackers).
"""

from __future__ import annotations

import argparse
from typing import Any


def add_tracker_flags(parser: argparse.ArgumentParser | Any) -> None:
    """Register the tracker flags (defaults None: not given)."""
    group = parser.add_argument_group("experiment trackers (TensorBoard on by default; MLflow, W&B on request)") \
        if isinstance(parser, argparse.ArgumentParser) else parser
    group.add_argument("--no-tensorboard", dest="tensorboard", action="store_false", default=None,
                       help="no TensorBoard event files in the run folder (default: written; see "
                            "`yolotui tensorboard`)")
    group.add_argument("--mlflow", nargs="?", const=True, default=None, metavar="URI",
                       help="log params, per-epoch metrics and the checkpoints to MLflow (default store: "
                            "PROJECT/mlruns, or MLFLOW_TRACKING_URI); needs yolotui[mlflow]")
    group.add_argument("--wandb", default=None, metavar="PROJECT",
                       help="log to Weights & Biases project PROJECT (WANDB_MODE=offline honoured); "
                            "needs yolotui[wandb]")


def tracker_flags(args: argparse.Namespace) -> Any:
    """The tracker flags given, as a runs.trackers.TrackerFlags (None when the command has none)."""
    if not hasattr(args, "mlflow"):
        return None
    from yolotui.runs.trackers import TrackerFlags

    return TrackerFlags(tensorboard=getattr(args, "tensorboard", None), mlflow=getattr(args, "mlflow", None),
                        wandb=getattr(args, "wandb", None))
