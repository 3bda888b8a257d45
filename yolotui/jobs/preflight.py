"""Checks made before anything detaches, torch-free and quick.

A run used to start in the background and fail a minute later on a data.yaml without images or a model
YAML naming an unknown module, and `resume` launched before looking at last.pt. These checks run first, in
the use case (new run, fine-tune, resume), and raise UserError with one line naming the file and what to
fix:

- `check_data`: the data.yaml parses (bounded YAML), names its splits, and train and val hold images;
- `check_model`: the model YAML parses, has backbone and head lists of [from, number, module, args] rows,
  and names only modules the engine knows (configs/modules.py).

The resume's check of last.pt is the engine backend's (yolotui/backends/engine/resume.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from yolotui.errors import UserError


def check_data(data: str | Path) -> dict[str, int]:
    """Image counts per split of a data.yaml; UserError when it does not parse or a split has no images."""
    from yolotui.datasets import list_images, load_data_yaml

    config = load_data_yaml(Path(data))
    counts = {"train": len(list_images(config.train)), "val": len(list_images(config.val))}
    for split, count in counts.items():
        if count == 0:
            raise UserError(f"{data}: no images found for '{split}' ({', '.join(config.split(split))}); "
                            "check the paths in the data.yaml")
    return counts


def check_model(cfg: str | Path) -> int:
    """The number of layers of a model YAML; UserError naming the file, layer and field when it is wrong."""

    from yolotui import safe_yaml
    from yolotui.configs import resolve_model_cfg
    from yolotui.configs.modules import KNOWN_MODULES, short_module_name

    path = resolve_model_cfg(str(cfg))
    data = safe_yaml.load_mapping(path, "--cfg")  # read, bounded, parsed: one line naming the file when wrong
    rows: list[Any] = []
    for part in ("backbone", "head"):
        value = data.get(part)
        if not isinstance(value, list) or not value:
            raise UserError(f"--cfg {path}: '{part}' must be a non-empty list of [from, number, module, args] rows")
        rows += value
    for index, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != 4:
            raise UserError(f"--cfg {path}: layer {index}: must be [from, number, module, args], got {str(row)[:60]}")
        if short_module_name(row[2]) is None:
            raise UserError(f"--cfg {path}: layer {index}: unknown module {str(row[2])[:40]!r}; known modules: "
                            f"{', '.join(sorted(KNOWN_MODULES))}")
    return len(rows)
