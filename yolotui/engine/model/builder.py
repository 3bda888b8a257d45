"""Build a YoloModel from an official-format model YAML.

The format is the official YOLOv9 one: `nc`, `depth_multiple`, `width_multiple`, optional `activation`,
and `backbone` + `head` lists of `[from, number, module, args]`. As in the official code, the width
multiple scales only the first argument (output channels) of Conv, AConv, ADown, ELAN1, RepNCSPELAN4 and
SPPELAN, and the depth multiple scales `number` (repeats of the whole module) when it is above 1.
One small extension: RepConvN, RepNBottleneck and RepNCSP take their input width from `from` like Conv
(the official builder would want it written in `args`); the official configs do not use them as layers.

Every mistake is reported as a UserError naming the file, the layer index and what is wrong.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import re
from pathlib import Path

import torch
from torch import nn

from yolotui import safe_yaml
from yolotui.engine.model.blocks import ELAN1, SPPELAN, RepNBottleneck, RepNCSP, RepNCSPELAN4
from yolotui.engine.model.conv import (
    AConv,
    ADown,
    CBFuse,
    CBLinear,
    Concat,
    Conv,
    RepConvN,
    Silence,
    default_activation,
    make_divisible,
)
from yolotui.engine.model.gradlayout import Upsample
from yolotui.engine.model.heads import HEAD_TYPES, DDetect, DualDDetect
from yolotui.engine.model.yolo import INPUT, YoloModel, empty_storage
from yolotui.errors import UserError

MODULES: dict[str, type[nn.Module]] = {
    "Conv": Conv, "AConv": AConv, "ADown": ADown, "ELAN1": ELAN1, "RepConvN": RepConvN,
    "RepNBottleneck": RepNBottleneck, "RepNCSP": RepNCSP, "RepNCSPELAN4": RepNCSPELAN4, "SPPELAN": SPPELAN,
    "Concat": Concat, "Silence": Silence, "CBLinear": CBLinear, "CBFuse": CBFuse, "Upsample": Upsample,
    "DDetect": DDetect, "DualDDetect": DualDDetect,
}
# Modules whose input width comes from `from` and whose first arg is the (width-scaled) output width.
WIDTH_MODULES = (Conv, AConv, ADown, ELAN1, RepNCSPELAN4, SPPELAN, RepConvN, RepNBottleneck, RepNCSP)
# How many leading args of each module are channel counts (used by `narrow_config`).
_CHANNEL_ARGS = {Conv: 1, AConv: 1, ADown: 1, RepConvN: 1, RepNBottleneck: 1, RepNCSP: 1, ELAN1: 3,
                 RepNCSPELAN4: 3, SPPELAN: 2}
_MULTI_INPUT = (Concat, CBFuse, DDetect, DualDDetect)
# Sides of the zero image run through a new model to check it and measure its strides: the smallest
# first (cheap, enough for P3-P5 models), a larger one when that is too small for the model's depth.
PROBE_SIZES = (32, 64, 128)
_ACTIVATIONS = {"SiLU": nn.SiLU, "ReLU": nn.ReLU, "LeakyReLU": nn.LeakyReLU, "Hardswish": nn.Hardswish,
                "Mish": nn.Mish, "GELU": nn.GELU, "Identity": nn.Identity}


def module_name(name: object) -> str | None:
    """The registry key for a YAML module name ('nn.Upsample', 'models.common.Conv' -> 'Upsample', 'Conv')."""
    if not isinstance(name, str):
        return None
    short = name.rsplit(".", 1)[-1]
    return short if short in MODULES else None


def load_model_yaml(cfg: str | Path | dict) -> tuple[dict, str]:
    """The config dict (a copy) and a label naming where it came from, for error messages.

    `cfg` is a dict, a path, or anything `yolotui.configs.resolve_model_cfg` accepts ('yolov9-s').
    """
    if isinstance(cfg, dict):
        return copy.deepcopy(cfg), str(cfg.get("yaml_file", "<model dict>"))
    from yolotui.configs import resolve_model_cfg

    path = resolve_model_cfg(str(cfg))
    data = safe_yaml.load_mapping(path, "model config")
    if not data:
        raise UserError(f"model config {path}: empty; a model config is a mapping with nc, backbone and head")
    return data, str(path)


def _check_top_level(d: dict, source: str) -> None:
    for key in ("backbone", "head"):
        if not isinstance(d.get(key), list):
            raise UserError(f"{source}: `{key}` must be a list of [from, number, module, args] layers")
    nc = d.get("nc")
    if not isinstance(nc, int) or isinstance(nc, bool) or nc < 1:
        raise UserError(f"{source}: `nc` must be a positive whole number of classes, got {nc!r}")
    for key in ("depth_multiple", "width_multiple"):
        value = d.get(key, 1.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise UserError(f"{source}: `{key}` must be a positive number, got {value!r}")


def _parse_activation(text: object, source: str) -> nn.Module | None:
    if text is None:
        return None
    match = re.fullmatch(r"\s*(?:torch\.)?(?:nn\.)?(\w+)\(\s*([0-9.eE+-]*)\s*\)\s*", str(text))
    if not match or match.group(1) not in _ACTIVATIONS:
        raise UserError(f"{source}: `activation: {text}` is not supported; use one of "
                        + ", ".join(f"nn.{name}()" for name in _ACTIVATIONS))
    cls = _ACTIVATIONS[match.group(1)]
    act = cls(float(match.group(2))) if match.group(2) else cls()
    return act  # not in place (see Conv.default_act)


class _LayerError(Exception):
    """A problem with one layer; turned into a UserError with file and index by the caller."""


def _resolve_sources(f: object, i: int) -> int | list[int]:
    def one(j: object) -> int:
        if not isinstance(j, int) or isinstance(j, bool):
            raise _LayerError(f"`from` must be a layer index or a list of them, got {j!r}")
        if j == -1:
            return i - 1 if i > 0 else INPUT
        absolute = i + j if j < 0 else j
        if absolute < 0 or absolute >= i:
            raise _LayerError(f"`from` index {j} does not exist (layers before this one are 0..{i - 1})"
                              if i else f"`from` index {j} does not exist (layer 0 can only read the input, -1)")
        return absolute

    if isinstance(f, list):
        if not f:
            raise _LayerError("`from` is an empty list")
        return [one(j) for j in f]
    return one(f)


def _resolve_arg(value: object, nc: int, anchors: object) -> object:
    # The official builder eval()s string args; only these names ever occur, so they are mapped without eval.
    if value == "nc":
        return nc
    if value == "anchors":
        return anchors
    if value == "None":
        return None
    return value


def _yaml_params(module: type[nn.Module]) -> list[str]:
    """The constructor parameters a YAML `args` list fills, written like `c3` or `c5=1`."""
    params = list(inspect.signature(module).parameters.values())
    if issubclass(module, WIDTH_MODULES) or module is CBLinear:
        params = params[1:]  # c1 comes from `from`
    elif module in HEAD_TYPES:
        params = [p for p in params if p.name != "ch"]
    return [p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}" for p in params]


def _bind(module: type[nn.Module], ctor_args: list, yaml_args: list, mname: str) -> None:
    try:
        inspect.signature(module).bind(*ctor_args)
    except TypeError:
        wanted = ", ".join(_yaml_params(module))
        raise _LayerError(f"wrong number of args for {mname}: it takes [{wanted}], got {len(yaml_args)}: "
                          f"{yaml_args}") from None


def _layer_spec(module, mname, sources, args, nc, width, out_ch, ch_in):
    """Constructor args and output channels (an int, or a list for CBLinear) of one layer."""

    def width_of(j: int):
        return ch_in if j == INPUT else out_ch[j]

    def single_width(j: int) -> int:
        c = width_of(j)
        if isinstance(c, list):
            raise _LayerError(f"reads layer {j}, a CBLinear whose split outputs only CBFuse can take")
        return c

    if module in _MULTI_INPUT and not isinstance(sources, list):
        raise _LayerError(f"{mname} takes several inputs: `from` must be a list of layer indices")
    if module not in _MULTI_INPUT and isinstance(sources, list):
        raise _LayerError(f"{mname} takes one input, but `from` lists {len(sources)}")

    if issubclass(module, WIDTH_MODULES):
        if not args or not isinstance(args[0], int) or isinstance(args[0], bool) or args[0] < 1:
            raise _LayerError(f"{mname} needs the output channels as its first arg, got {args}")
        c2 = make_divisible(args[0] * width, 8)
        return [single_width(sources), c2, *args[1:]], c2
    if module is Concat:
        return list(args), sum(single_width(j) for j in sources)
    if module is CBLinear:
        if not args or not isinstance(args[0], list) or not all(isinstance(c, int) and c > 0 for c in args[0]):
            raise _LayerError(f"CBLinear needs a list of output widths as its first arg, got {args}")
        return [single_width(sources), list(args[0]), *args[1:]], list(args[0])
    if module is CBFuse:
        return list(args), _cbfuse_width(sources, args, width_of, single_width)
    if module in HEAD_TYPES:
        widths = [single_width(j) for j in sources]
        if module is DualDDetect and len(widths) % 2:
            raise _LayerError(f"DualDDetect needs an even number of inputs (aux levels, then main), got {len(widths)}")
        return [*args, widths], None
    return list(args), single_width(sources)  # Silence, Upsample: width unchanged


def _cbfuse_width(sources, args, width_of, single_width) -> int:
    if not args or not isinstance(args[0], list) or len(args[0]) != len(sources) - 1:
        raise _LayerError(f"CBFuse needs one split index per CBLinear input ({len(sources) - 1}), got {args}")
    target = single_width(sources[-1])
    for j, split in zip(sources[:-1], args[0]):
        splits = width_of(j)
        if not isinstance(splits, list):
            raise _LayerError(f"CBFuse input layer {j} is not a CBLinear")
        if not isinstance(split, int) or not 0 <= split < len(splits):
            raise _LayerError(f"CBFuse split index {split} is out of range for layer {j} ({len(splits)} splits)")
        if splits[split] != target:
            raise _LayerError(f"channels do not match: split {split} of layer {j} has {splits[split]} channels, "
                              f"layer {sources[-1]} has {target}")
    return target


def parse_layers(d: dict, ch_in: int, source: str) -> list[nn.Module]:
    """The layers of config `d` (already checked at top level), each tagged with i, f, type, sources, np."""
    nc, depth, width = d["nc"], float(d.get("depth_multiple", 1.0)), float(d.get("width_multiple", 1.0))
    rows = list(d["backbone"]) + list(d["head"])
    layers: list[nn.Module] = []
    out_ch: list = []
    for i, row in enumerate(rows):
        mname = row[2] if isinstance(row, list) and len(row) == 4 else "?"
        try:
            if not isinstance(row, list) or len(row) != 4:
                raise _LayerError(f"must be [from, number, module, args], got {row!r}")
            f, number, _, raw_args = row
            key = module_name(mname)
            if key is None:
                raise _LayerError(f"unknown module {mname!r}; known modules: {', '.join(MODULES)}")
            module = MODULES[key]
            if not isinstance(number, int) or isinstance(number, bool) or number < 1:
                raise _LayerError(f"`number` must be a whole number >= 1, got {number!r}")
            if not isinstance(raw_args, list):
                raise _LayerError(f"`args` must be a list, got {raw_args!r}")
            if module in HEAD_TYPES and i != len(rows) - 1:
                raise _LayerError(f"{mname} must be the last layer")
            if i == len(rows) - 1 and module not in HEAD_TYPES:
                raise _LayerError("the last layer must be a detection head (DDetect or DualDDetect)")
            sources = _resolve_sources(f, i)
            args = [_resolve_arg(a, nc, d.get("anchors")) for a in raw_args]
            repeats = max(round(number * depth), 1) if number > 1 else number
            ctor_args, c_out = _layer_spec(module, mname, sources, args, nc, width, out_ch, ch_in)
            _bind(module, ctor_args, raw_args, mname)
            try:
                built = [module(*ctor_args) for _ in range(repeats)]
            except (ValueError, RuntimeError, TypeError) as exc:
                raise _LayerError(f"cannot build {mname}{raw_args}: {exc}") from exc
        except _LayerError as exc:
            raise UserError(f"{source}: layer {i} ({mname}): {exc}") from None
        layer = built[0] if repeats == 1 else nn.Sequential(*built)
        layer.i, layer.f, layer.type, layer.sources = i, f, str(mname), sources
        layer.np = sum(p.numel() for p in layer.parameters())
        layers.append(layer)
        out_ch.append(c_out)
    return layers


def _probe(model: YoloModel, ch_in: int, source: str) -> list[float]:
    """Run a zero image through every layer; name the first layer that fails. Returns the head strides."""
    on_meta = next(model.parameters()).device.type == "meta"
    if on_meta:
        # Forward passes on the meta device are slow (Python decompositions); real storage is fast.
        empty_storage(model, "cpu")
    try:
        for size in PROBE_SIZES:
            try:
                return _probe_layers(model, ch_in, source, size)
            except UserError:
                if size == PROBE_SIZES[-1]:
                    raise
        raise AssertionError("unreachable")
    finally:
        if on_meta:
            empty_storage(model, "meta")


def _probe_layers(model: YoloModel, ch_in: int, source: str, size: int) -> list[float]:
    param = next(model.parameters())
    x = torch.zeros(1, ch_in, size, size, device=param.device, dtype=param.dtype)
    image, outputs = x, []
    was_training = model.training
    model.eval()  # eval: BatchNorm statistics stay untouched
    try:
        with torch.no_grad():
            for layer in model.model:
                inputs = model._gather(layer, x, image, outputs)
                try:
                    x = layer.forward_maps(inputs) if layer is model.model[-1] else layer(inputs)
                except (RuntimeError, ValueError, IndexError) as exc:
                    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                    raise UserError(f"{source}: layer {layer.i} ({layer.type}): fails on a {size}x{size} "
                                    f"test image, check its inputs' channels and sizes: {first}") from None
                outputs.append(x)
    finally:
        model.train(was_training)
    maps = x[-1] if isinstance(model.detect, DualDDetect) else x
    return [size / m.shape[-2] for m in maps]


def build_model(cfg: str | Path | dict, nc: int | None = None, ch: int = 3,
                device: str | torch.device | None = None) -> YoloModel:
    """A YoloModel from a config dict, a YAML path, or a shipped config name ('yolov9-s').

    `nc` overrides the config's class count. `device='meta'` builds without memory or initialisation
    (for counting, or before loading a state dict after `model.materialize()`).
    """
    d, source = load_model_yaml(cfg)
    if nc is not None:
        d["nc"] = int(nc)
    _check_top_level(d, source)
    act = _parse_activation(d.get("activation"), source)
    d.pop("yaml_file", None)
    d["ch"] = ch
    placement = torch.device(device) if device is not None else contextlib.nullcontext()
    with default_activation(act), placement:
        layers = parse_layers(d, ch, source)
        model = YoloModel(layers, d, backbone_layers=len(d["backbone"]))
    strides = _probe(model, ch, source)
    model.set_strides(strides)
    model.detect.bias_init(strides)
    return model


def narrow_config(cfg: dict, factor: float, divisor: int = 8) -> dict:
    """A copy of config `cfg` with every channel count multiplied by `factor` (rounded up to `divisor`).

    Unlike `width_multiple`, which the official builder applies to output widths only, this scales hidden
    widths and CBLinear splits too, so any config (the CBNet ones included) shrinks consistently: useful
    for tests and for quick CPU demos.
    """
    out = copy.deepcopy(cfg)
    for row in out["backbone"] + out["head"]:
        key = module_name(row[2])
        module = MODULES.get(key) if key else None
        args = row[3]
        if module is CBLinear:
            args[0] = [make_divisible(c * factor, divisor) for c in args[0]]
        elif module in _CHANNEL_ARGS:
            for k in range(min(_CHANNEL_ARGS[module], len(args))):
                args[k] = make_divisible(args[k] * factor, divisor)
    return out
