"""data.yaml loading in the official YOLOv9 and the ultralytics forms (torch-free).

Accepted keys: `path` (data set root), `train`, `val` and optional `test` (each a folder, a .txt list
of images, an image, or a list of those, relative to the root), `nc`, and `names` (a list, or a dict
{0: name, ...}). Where `path` is missing the root is the yaml's folder. A relative `path` is tried
against the yaml's folder, its parent (the official repository keeps data/*.yaml one level below the
folder its relative paths start from) and the working folder, in that order; the first that exists wins.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from yolotui import safe_yaml
from yolotui.errors import UserError

SPLITS = ("train", "val", "test")


@dataclass
class DataConfig:
    """A resolved data.yaml: absolute source paths per split, class count and names."""

    yaml_path: str
    root: str
    train: list[str]
    val: list[str]
    test: list[str] = field(default_factory=list)
    nc: int = 0
    names: list[str] = field(default_factory=list)

    def split(self, name: str) -> list[str]:
        """The sources of split `name` ('train', 'val' or 'test')."""
        if name not in SPLITS:
            raise ValueError(f"unknown split {name!r}")
        return getattr(self, name)


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise UserError(f"{path}: data.yaml not found; pass the path of a data set's yaml file")
    try:
        data = safe_yaml.load_file(path)
    except yaml.YAMLError as exc:
        where = safe_yaml.error_line(exc)
        raise UserError(f"{path}{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read ({exc})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping with keys train, val, names")
    return data


def _resolve_root(path: Path, data: dict[str, Any]) -> Path:
    value = data.get("path")
    here = path.parent.resolve()
    if value in (None, ""):
        return here
    if not isinstance(value, str):
        raise UserError(f"{path}: 'path' must be a folder name, got {value!r}")
    given = Path(os.path.expanduser(value))
    if given.is_absolute():
        candidates = [given]
    else:
        candidates = [here / given, here.parent / given, Path.cwd() / given]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate.resolve()
    raise UserError(f"{path}: 'path' names {value}, which does not exist (looked in {candidates[0]}); "
                    "fix 'path' or remove it to use the yaml's folder")


def _resolve_split(path: Path, data: dict[str, Any], key: str, root: Path, required: bool) -> list[str]:
    value = data.get(key)
    if value in (None, "", []):
        if required:
            raise UserError(f"{path}: '{key}' is missing; add '{key}: images/{key}' (a folder, a list or a .txt file)")
        return []
    entries = value if isinstance(value, list) else [value]
    sources = []
    for entry in entries:
        if not isinstance(entry, str):
            raise UserError(f"{path}: '{key}' entries must be paths, got {entry!r}")
        given = Path(os.path.expanduser(entry))
        resolved = given if given.is_absolute() else root / given
        if not resolved.exists() and entry.startswith("../"):
            resolved = root / entry[3:]  # the official loader's fallback for paths written from the repo root
        if not resolved.exists():
            raise UserError(f"{path}: '{key}' names {entry} ({resolved}), which does not exist; "
                            "fix the path (relative to 'path' or the yaml's folder)")
        sources.append(str(resolved.resolve()))
    return sources


def _resolve_names(path: Path, data: dict[str, Any]) -> tuple[int, list[str]]:
    names = data.get("names")
    nc = data.get("nc")
    if nc is not None and (not isinstance(nc, int) or isinstance(nc, bool) or nc < 1):
        raise UserError(f"{path}: 'nc' must be a positive whole number, got {nc!r}")
    if names is None:
        if nc is None:
            raise UserError(f"{path}: 'names' is missing; add 'names: [class0, class1, ...]'")
        return nc, [str(i) for i in range(nc)]
    if isinstance(names, dict):
        keys = list(names.keys())
        if not all(isinstance(k, int) and not isinstance(k, bool) for k in keys):
            raise UserError(f"{path}: 'names' keys must be class ids 0, 1, 2, ...; got {keys[:5]!r}")
        if sorted(keys) != list(range(len(keys))):
            raise UserError(f"{path}: 'names' keys must be 0..{len(keys) - 1} with no gaps; got {sorted(keys)[:10]!r}")
        name_list = [str(names[i]) for i in range(len(keys))]
    elif isinstance(names, list):
        name_list = [str(n) for n in names]
    else:
        raise UserError(f"{path}: 'names' must be a list or a dict of class ids to names")
    if not name_list:
        raise UserError(f"{path}: 'names' is empty; list at least one class")
    if nc is not None and nc != len(name_list):
        raise UserError(f"{path}: 'nc' is {nc} but 'names' lists {len(name_list)} classes; make them agree")
    return len(name_list), name_list


def load_data_yaml(path: str | os.PathLike[str]) -> DataConfig:
    """Read and check a data.yaml; every problem is a UserError naming the key and the file."""
    yaml_path = Path(path).expanduser()
    data = _read_yaml(yaml_path)
    root = _resolve_root(yaml_path, data)
    train = _resolve_split(yaml_path, data, "train", root, required=True)
    val = _resolve_split(yaml_path, data, "val", root, required=True)
    test = _resolve_split(yaml_path, data, "test", root, required=False)
    nc, names = _resolve_names(yaml_path, data)
    return DataConfig(yaml_path=str(yaml_path.resolve()), root=str(root), train=train, val=val, test=test,
                      nc=nc, names=names)
