"""Model size: layer count, parameters and GFLOPs, counted the way the official YOLOv9 summary counts.

FLOPs are 2 x multiply-accumulates of every Conv2d plus the BatchNorm element operations, measured from
layer shapes on one small square image (the largest stride, at least 32) and scaled to `imgsz` by area,
as the official summary (thop) does. Works on models built under `torch.device('meta')`.
"""

from __future__ import annotations

import torch
from torch import nn

from yolotui.engine.model.yolo import empty_storage

# thop counts a BatchNorm as 2 ops per element, doubled for the affine scale and shift; the official
# summary then doubles every count (MACs to FLOPs).
BN_OPS_PER_ELEMENT = 4


def count_flops(model: nn.Module, imgsz: int | tuple[int, int] = 640, ch: int = 3) -> float:
    """GFLOPs of one forward pass at `imgsz` (an int or (height, width))."""
    height, width = (imgsz, imgsz) if isinstance(imgsz, int) else imgsz
    stride = max(int(max(getattr(model, "stride_values", None) or [32])), 32)
    on_meta = next(model.parameters()).device.type == "meta"
    if on_meta:
        # Forward passes on the meta device are slow (Python decompositions); real storage is fast.
        empty_storage(model, "cpu")
    try:
        return _count(model, stride, ch) / 1e9 * (height / stride) * (width / stride)
    finally:
        if on_meta:
            empty_storage(model, "meta")


def _count(model: nn.Module, stride: int, ch: int) -> float:
    total = [0.0]

    def conv_hook(module: nn.Conv2d, _inputs, output) -> None:
        kernel = module.kernel_size[0] * module.kernel_size[1]
        total[0] += 2.0 * output.numel() * (module.in_channels // module.groups) * kernel

    def bn_hook(module: nn.BatchNorm2d, inputs, _output) -> None:
        total[0] += 2.0 * BN_OPS_PER_ELEMENT * inputs[0].numel()  # x2 like conv MACs, as the official summary

    handles = []
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            handles.append(module.register_forward_hook(conv_hook))
        elif isinstance(module, nn.BatchNorm2d):
            handles.append(module.register_forward_hook(bn_hook))
    param = next(model.parameters())
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            image = torch.zeros(1, ch, stride, stride, device=param.device, dtype=param.dtype)
            model.forward_maps(image) if hasattr(model, "forward_maps") else model(image)
    finally:
        model.train(was_training)
        for handle in handles:
            handle.remove()
    return total[0]


def count_layers(model: nn.Module) -> int:
    """Number of modules, shared ones once (the official summary's 'layers')."""
    return len(list(model.modules()))


def count_params(model: nn.Module) -> int:
    """Number of parameters, frozen ones (the DFL integral) included."""
    return sum(p.numel() for p in model.parameters())


def model_info(model: nn.Module, imgsz: int = 640) -> dict:
    """`{'layers', 'params', 'gflops'}` of `model` at an `imgsz` x `imgsz` input."""
    ch = int(getattr(model, "yaml", {}).get("ch", 3))
    return {"layers": count_layers(model), "params": count_params(model), "gflops": count_flops(model, imgsz, ch)}
