"""Inference forms of a model: Conv+BN fusing, RepConvN re-parameterisation, and dropping the PGI branch.

`convert_for_inference` turns a YOLOv9 training model (DualDDetect head) into its GELAN inference model:
only the layers the main head branch depends on are kept, renumbered, and the main branch
(`cv4`/`cv5`/`dfl2`) becomes a single DDetect (`cv2`/`cv3`/`dfl`). YOLOv9-X so converted has exactly
the GELAN-X layers and parameter counts, which is how the published inference figures arise.
"""

from __future__ import annotations

import copy
import re

from torch import nn

from yolotui.engine.model.conv import Conv, RepConvN, Silence
from yolotui.engine.model.heads import DDetect, DualDDetect
from yolotui.engine.model.yolo import INPUT, YoloModel

# converted DDetect attribute -> DualDDetect main-branch attribute it is loaded from
_OLD_HEAD_NAME = {"cv2": "cv4", "cv3": "cv5", "dfl": "dfl2"}


def fuse(model: YoloModel) -> YoloModel:
    """Re-parameterise every RepConvN and fold every BatchNorm into its convolution, in place.

    Only for inference: the fused model has fewer parameters and no BatchNorm statistics to train.
    """
    for module in list(model.modules()):
        if isinstance(module, RepConvN):
            module.reparameterize()
    for module in list(model.modules()):
        if isinstance(module, Conv):
            module.fuse_bn()
    return model


def is_fused(model: nn.Module) -> bool:
    """True when some Conv has lost its BatchNorm or some RepConvN its branches."""
    return any((isinstance(m, Conv) and not hasattr(m, "bn")) or (isinstance(m, RepConvN) and hasattr(m, "conv"))
               for m in model.modules())


def _needed_layers(model: YoloModel, roots: list[int]) -> list[int]:
    needed: set[int] = set()
    stack = list(roots)
    while stack:
        j = stack.pop()
        if j == INPUT or j in needed:
            continue
        needed.add(j)
        sources = model.model[j].sources
        stack.extend(sources if isinstance(sources, list) else [sources])
    return sorted(needed)


def _drop_leading_silence(model: YoloModel, kept: list[int]) -> list[int]:
    # A Silence on the image can go when only the next kept layer reads it (it then reads the image, -1).
    first = kept[0]
    if not isinstance(model.model[first], Silence) or model.model[first].sources != INPUT or len(kept) < 2:
        return kept
    readers = [i for i in kept[1:] if first in _as_list(model.model[i].sources)]
    if readers == [kept[1]] and not isinstance(model.model[kept[1]].sources, list):
        return kept[1:]
    return kept


def _as_list(sources) -> list[int]:
    return sources if isinstance(sources, list) else [sources]


def inference_config(model: YoloModel) -> tuple[dict, dict[int, int]]:
    """The GELAN config equivalent to the main branch of a DualDDetect model, and old->new layer indices."""
    head = model.detect
    head_index = len(model.model) - 1
    main_sources = _as_list(model.model[head_index].sources)[head.nl:]
    needed = _needed_layers(model, main_sources)
    kept = _drop_leading_silence(model, needed)
    renumber = {old: new for new, old in enumerate(kept)}
    if kept is not needed:
        renumber[needed[0]] = INPUT  # the dropped Silence stood for the image

    rows = list(model.yaml["backbone"]) + list(model.yaml["head"])

    def new_from(old_source: int, new_i: int) -> int:
        new = renumber[old_source] if old_source != INPUT else INPUT
        return -1 if new == INPUT or new == new_i - 1 else new

    backbone, neck = [], []
    for new_i, old in enumerate(kept):
        f, number, module, args = rows[old]
        sources = model.model[old].sources
        f_new = [new_from(j, new_i) for j in sources] if isinstance(sources, list) else new_from(sources, new_i)
        (backbone if old < model.backbone_layers else neck).append([f_new, number, module, copy.deepcopy(args)])
    head_row = rows[head_index]
    neck.append([[renumber[j] for j in main_sources], 1, "DDetect", copy.deepcopy(head_row[3])])
    cfg = copy.deepcopy({k: v for k, v in model.yaml.items() if k not in ("backbone", "head")})
    cfg["backbone"], cfg["head"] = backbone, neck
    renumber[head_index] = len(kept)
    return cfg, renumber


def _map_key(key: str, old_of_new: dict[int, int], new_head: int) -> str:
    """The training-model state-dict key that feeds `key` of the converted model."""
    match = re.match(r"model\.(\d+)\.(.*)", key)
    if not match:
        return key
    new_i, rest = int(match.group(1)), match.group(2)
    if new_i == new_head:
        first, _, tail = rest.partition(".")
        rest = f"{_OLD_HEAD_NAME.get(first, first)}.{tail}"
    return f"model.{old_of_new[new_i]}.{rest}"


def convert_for_inference(model: YoloModel) -> YoloModel:
    """An eval-mode, fused copy of `model` for inference; a dual-head model loses its auxiliary branch.

    The input model is not changed. The copy's main-branch output equals the original's (to float
    rounding from fusing).
    """
    from yolotui.engine.model.builder import build_model

    if isinstance(model.detect, DDetect):
        converted = copy.deepcopy(model)
        return fuse(converted).eval()
    if not isinstance(model.detect, DualDDetect):
        raise TypeError(f"cannot convert a model whose head is {type(model.detect).__name__}")
    cfg, renumber = inference_config(model)
    param = next(model.parameters())
    # built on the meta device: no random init, every value is loaded from `model` below
    converted = build_model(cfg, ch=int(model.yaml.get("ch", 3)), device="meta")
    if param.device.type != "meta":
        converted.materialize(param.device)
    converted.to(param.dtype)
    if is_fused(model):
        fuse(converted)
    old_of_new = {new: old for old, new in renumber.items() if new != INPUT}
    new_head = len(converted.model) - 1
    source_state = model.state_dict()
    mapped = {key: source_state[_map_key(key, old_of_new, new_head)] for key in converted.state_dict()}
    converted.load_state_dict(mapped, strict=True)
    converted.names = list(getattr(model, "names", converted.names))
    return fuse(converted).eval()
