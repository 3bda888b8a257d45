"""The numeric precision of the training forward pass: which autocast dtype, if any, a device trains under.

`--precision auto` (the default) trains CUDA devices under float16 autocast with a gradient scaler, as the
official trainer does, and CPUs whose oneDNN runs bfloat16 natively (AVX512-BF16 or AMX) under bfloat16
autocast: convolutions, which are most of a step, then run in bfloat16 while the weights, the optimizer, the
loss and validation stay in float32 (bfloat16 keeps float32's exponent range, so no scaler is needed).
Elsewhere the CPU trains in float32. `--precision fp32` turns autocast off on every device.

The choice is a pure function of the option and the hardware, so a resumed run on the same machine makes the
same choice and resumes bit-identically.
"""

from __future__ import annotations

from typing import Any

import torch


def cpu_has_native_bf16() -> bool:
    """True when oneDNN on this CPU computes bfloat16 natively (not emulated, which would be slower)."""
    try:
        return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def autocast_dtype(device: torch.device, precision: str = "auto") -> torch.dtype | None:
    """The autocast dtype for training on `device` under `precision`; None for plain float32."""
    if precision == "fp32":
        return None
    if device.type == "cuda":
        return torch.float16
    if device.type == "cpu" and cpu_has_native_bf16():
        return torch.bfloat16
    return None


def describe(dtype: torch.dtype | None) -> str:
    """A short word for logs and the launch line: fp16 AMP, bf16 autocast or fp32."""
    if dtype is torch.float16:
        return "fp16 AMP"
    if dtype is torch.bfloat16:
        return "bf16 autocast"
    return "fp32"


def to_float32(tree: Any) -> Any:
    """`tree` (a tensor, or lists/tuples of them, as model heads return) with floating tensors in float32."""
    if isinstance(tree, torch.Tensor):
        return tree.float() if tree.is_floating_point() and tree.dtype != torch.float32 else tree
    if isinstance(tree, (list, tuple)):
        return type(tree)(to_float32(item) for item in tree)
    return tree
