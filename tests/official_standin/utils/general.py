"""Stand-in helpers: the logger, numbered save folders, YAML saving, strip_optimizer."""

import logging
import os
import sys
from pathlib import Path

import yaml

LOGGER = logging.getLogger("standin")
LOGGER.setLevel(logging.INFO)
_handler = logging.StreamHandler(sys.stdout)
_handler.setFormatter(logging.Formatter("%(message)s"))
LOGGER.addHandler(_handler)
LOGGER.propagate = False


def increment_path(path, exist_ok=False):
    path = Path(path)
    if path.exists() and not exist_ok:
        n = 2
        while Path(f"{path}{n}").exists():
            n += 1
        path = Path(f"{path}{n}")
    return path


def yaml_save(file, data):
    with open(file, "w") as handle:
        yaml.safe_dump({k: str(v) if isinstance(v, Path) else v for k, v in data.items()}, handle, sort_keys=False)


def strip_optimizer(f):
    import torch

    x = torch.load(f, map_location="cpu")  # torch's default weights_only, as the official code does
    x["model"] = x.get("ema") or x["model"]
    for key in ("optimizer", "best_fitness", "ema", "updates"):
        x[key] = None
    x["epoch"] = -1
    torch.save(x, f)
    LOGGER.info(f"Optimizer stripped from {f}, {os.path.getsize(f) / 1e6:.1f}MB")
