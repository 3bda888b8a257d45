"""Convolution-level building blocks: Conv (conv + BN + activation), the down-samplers AConv and ADown,
the re-parameterisable RepConvN, and the wiring modules Concat, Silence, CBLinear and CBFuse.

Attribute names (`conv`, `bn`, `cv1`, ...) follow the official YOLOv9 layout so that state-dict keys,
and therefore official weights, transfer by name and shape.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# BatchNorm settings the official models train with (set on every BN the builder creates).
BN_EPS = 1e-3
BN_MOMENTUM = 0.03


def autopad(kernel: int, padding: int | None = None, dilation: int = 1) -> int:
    """Padding that keeps the spatial size for stride 1 ('same' padding) unless given explicitly."""
    if dilation > 1:
        kernel = dilation * (kernel - 1) + 1
    return kernel // 2 if padding is None else padding


def make_divisible(value: float, divisor: int) -> int:
    """Smallest multiple of `divisor` that is >= `value` (channel rounding used by the width multiple)."""
    return int(math.ceil(value / divisor) * divisor)


def batch_norm(channels: int) -> nn.BatchNorm2d:
    """A BatchNorm2d with the official YOLOv9 eps and momentum."""
    return nn.BatchNorm2d(channels, eps=BN_EPS, momentum=BN_MOMENTUM)


class Conv(nn.Module):
    """Conv2d (no bias) + BatchNorm2d + activation; after `fuse_bn()` a biased Conv2d + activation."""

    # One activation instance shared by every Conv of a build, as in the official code (the builder may
    # swap it for the yaml's `activation:` while it builds). Not in place: the same values, and autograd
    # then keeps the activation's input instead of recomputing from its output (measured ~3 % per step).
    default_act: nn.Module = nn.SiLU()

    def __init__(self, c1: int, c2: int, k: int = 1, s: int = 1, p: int | None = None, g: int = 1,
                 d: int = 1, act: bool | nn.Module = True) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, autopad(k, p, d), groups=g, dilation=d, bias=False)
        self.bn = batch_norm(c2)
        self.act = self.default_act if act is True else act if isinstance(act, nn.Module) else nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        if hasattr(self, "bn"):
            return self.act(self.bn(self.conv(x)))
        return self.act(self.conv(x))

    def fuse_bn(self) -> None:
        """Fold the BatchNorm into the convolution (inference only)."""
        if hasattr(self, "bn"):
            self.conv = fuse_conv_and_bn(self.conv, self.bn)
            del self.bn


def _biased_conv_like(conv: nn.Conv2d, weight: Tensor, bias: Tensor) -> nn.Conv2d:
    """A frozen biased Conv2d with `conv`'s geometry holding `weight` and `bias` (no random init)."""
    fresh = nn.Conv2d(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding,
                      conv.dilation, conv.groups, bias=True, device="meta")
    fresh.weight = nn.Parameter(weight.detach().clone(), requires_grad=False)
    fresh.bias = nn.Parameter(bias.detach().clone(), requires_grad=False)
    return fresh


def fuse_conv_and_bn(conv: nn.Conv2d, bn: nn.BatchNorm2d) -> nn.Conv2d:
    """A biased Conv2d equal to `bn(conv(x))` with the BN's running statistics."""
    with torch.no_grad():
        scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
        conv_bias = conv.bias if conv.bias is not None else torch.zeros_like(bn.running_mean)
        return _biased_conv_like(conv, conv.weight * scale.view(-1, 1, 1, 1),
                                 (conv_bias - bn.running_mean) * scale + bn.bias)


class AConv(nn.Module):
    """Down-sample by 2: a 2x2 stride-1 average pool, then a 3x3 stride-2 Conv."""

    def __init__(self, c1: int, c2: int) -> None:
        super().__init__()
        self.cv1 = Conv(c1, c2, 3, 2, 1)

    def forward(self, x: Tensor) -> Tensor:
        return self.cv1(F.avg_pool2d(x, 2, 1, 0, False, True))


class ADown(nn.Module):
    """Down-sample by 2 in two halves: a 3x3 stride-2 Conv on one, a max pool then 1x1 Conv on the other."""

    def __init__(self, c1: int, c2: int) -> None:
        super().__init__()
        self.c = c2 // 2
        self.cv1 = Conv(c1 // 2, self.c, 3, 2, 1)
        self.cv2 = Conv(c1 // 2, self.c, 1, 1, 0)

    def forward(self, x: Tensor) -> Tensor:
        x = F.avg_pool2d(x, 2, 1, 0, False, True)
        x1, x2 = x.chunk(2, 1)
        return torch.cat((self.cv1(x1), self.cv2(F.max_pool2d(x2, 3, 2, 1))), 1)


class RepConvN(nn.Module):
    """A 3x3 Conv+BN and a 1x1 Conv+BN in parallel, summed, then the activation (no identity branch).

    `reparameterize()` merges both branches into one biased 3x3 convolution for inference.
    """

    default_act: nn.Module = nn.SiLU()

    def __init__(self, c1: int, c2: int, k: int = 3, s: int = 1, p: int = 1, g: int = 1, d: int = 1,
                 act: bool | nn.Module = True) -> None:
        super().__init__()
        if k != 3 or p != 1:
            raise ValueError("RepConvN needs kernel 3 and padding 1")
        self.g, self.c1, self.c2 = g, c1, c2
        self.act = self.default_act if act is True else act if isinstance(act, nn.Module) else nn.Identity()
        self.bn = None  # the official block has no identity branch; kept for key and layout parity
        self.conv1 = Conv(c1, c2, k, s, p=p, g=g, act=False)
        self.conv2 = Conv(c1, c2, 1, s, p=p - k // 2, g=g, act=False)

    def forward(self, x: Tensor) -> Tensor:
        if hasattr(self, "conv"):
            return self.act(self.conv(x))
        return self.act(self.conv1(x) + self.conv2(x))

    def reparameterize(self) -> None:
        """Replace the two branches by one equivalent biased 3x3 convolution (inference only)."""
        if hasattr(self, "conv"):
            return
        k3 = fuse_conv_and_bn(self.conv1.conv, self.conv1.bn) if hasattr(self.conv1, "bn") else self.conv1.conv
        k1 = fuse_conv_and_bn(self.conv2.conv, self.conv2.bn) if hasattr(self.conv2, "bn") else self.conv2.conv
        with torch.no_grad():
            b3 = k3.bias if k3.bias is not None else torch.zeros_like(k3.weight[:, 0, 0, 0])
            b1 = k1.bias if k1.bias is not None else torch.zeros_like(b3)
            conv = _biased_conv_like(k3, k3.weight + F.pad(k1.weight, [1, 1, 1, 1]), b3 + b1)
        self.conv = conv
        del self.conv1
        del self.conv2
        del self.bn


class Concat(nn.Module):
    """Concatenate a list of tensors along one dimension (channels by default)."""

    def __init__(self, dimension: int = 1) -> None:
        super().__init__()
        self.d = dimension

    def forward(self, x: list[Tensor]) -> Tensor:
        return torch.cat(x, self.d)


class Silence(nn.Module):
    """Identity; YOLOv9 uses it as layer 0 so that two branches can both start from the input image."""

    def forward(self, x: Tensor) -> Tensor:
        return x


class CBLinear(nn.Module):
    """One 1x1 convolution whose output is split into several routing tensors (CBNet auxiliary branch)."""

    def __init__(self, c1: int, c2s: list[int], k: int = 1, s: int = 1, p: int | None = None, g: int = 1) -> None:
        super().__init__()
        self.c2s = list(c2s)
        self.conv = nn.Conv2d(c1, sum(self.c2s), k, s, autopad(k, p), groups=g, bias=True)

    def forward(self, x: Tensor) -> tuple[Tensor, ...]:
        return self.conv(x).split(self.c2s, dim=1)


class CBFuse(nn.Module):
    """Sum the last input with chosen splits of CBLinear outputs, each resized (nearest) to its size."""

    def __init__(self, idx: list[int]) -> None:
        super().__init__()
        self.idx = list(idx)

    def forward(self, xs: list) -> Tensor:
        target_size = xs[-1].shape[2:]
        out = xs[-1]
        for split_index, routed in zip(self.idx, xs[:-1]):
            out = out + F.interpolate(routed[split_index], size=target_size, mode="nearest")
        return out


@contextlib.contextmanager
def default_activation(act: nn.Module | None) -> Iterator[None]:
    """Within the block, Conv and RepConvN built with `act=True` use `act` (one instance per class)."""
    if act is None:
        yield
        return
    import copy

    saved = Conv.default_act, RepConvN.default_act
    Conv.default_act, RepConvN.default_act = act, copy.deepcopy(act)
    try:
        yield
    finally:
        Conv.default_act, RepConvN.default_act = saved
