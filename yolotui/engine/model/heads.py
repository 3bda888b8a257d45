"""Detection heads: DFL (distribution focal-loss integral), DDetect and the dual-branch DualDDetect.

Training mode returns the raw maps `[B, 4*reg_max + nc, H, W]` per level (both branches for the dual
head, `[aux_maps, main_maps]`); eval mode returns `(decoded, maps)` where `decoded` is `[B, 4 + nc, A]`:
xywh boxes in input pixels, then sigmoid class scores (the main branch of a dual head).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from yolotui.engine.loss.boxes import dist2bbox, make_anchors
from yolotui.engine.model.conv import Conv, make_divisible
from yolotui.engine.model.gradlayout import dense_grad

REG_MAX = 16


class DFL(nn.Module):
    """Expected value of a softmax over `c1` distance bins, as a frozen 1x1 convolution with weights 0..c1-1."""

    def __init__(self, c1: int = REG_MAX) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c1, 1, 1, bias=False).requires_grad_(False)
        with torch.no_grad():
            # built on the CPU explicitly: arange on the meta device pulls in slow reference decompositions
            bins = torch.arange(c1, dtype=torch.float, device="cpu").view(1, c1, 1, 1)
            self.conv.weight.copy_(bins)
        self.c1 = c1

    def forward(self, x: Tensor) -> Tensor:
        b, _, a = x.shape
        return self.conv(x.view(b, 4, self.c1, a).transpose(2, 1).softmax(1)).view(b, 4, a)


def _box_branch(c_in: int, hidden: int, reg_max: int) -> nn.Sequential:
    return nn.Sequential(Conv(c_in, hidden, 3), Conv(hidden, hidden, 3, g=4), nn.Conv2d(hidden, 4 * reg_max, 1, groups=4))


def _cls_branch(c_in: int, hidden: int, nc: int) -> nn.Sequential:
    return nn.Sequential(Conv(c_in, hidden, 3), Conv(hidden, hidden, 3), nn.Conv2d(hidden, nc, 1))


def head_widths(c_first: int, nc: int, reg_max: int = REG_MAX) -> tuple[int, int]:
    """Hidden widths (box branch, class branch) of a head whose first input has `c_first` channels."""
    box = make_divisible(max(c_first // 4, reg_max * 4, 16), 4)
    cls = max(c_first, min(nc * 2, 128))
    return box, cls


def _init_branch_biases(box_branches, cls_branches, strides: list[float], nc: int) -> None:
    # Box logits start flat; class logits start at a prior of ~5 objects over `nc` classes per 640 image.
    for box, cls, s in zip(box_branches, cls_branches, strides):
        box[-1].bias.data[:] = 1.0
        cls[-1].bias.data[:nc] = math.log(5 / nc / (640 / s) ** 2)


class _HeadBase(nn.Module):
    """Shared decoding: anchors cached per input shape, DFL integral, distances to xywh pixels."""

    def __init__(self, nc: int, nl: int) -> None:
        super().__init__()
        self.nc = nc
        self.nl = nl
        self.reg_max = REG_MAX
        self.no = nc + self.reg_max * 4
        self.register_buffer("stride", torch.zeros(nl), persistent=False)
        self.stride_values: list[float] = []
        self._anchor_cache: tuple | None = None

    def _anchors(self, maps: list[Tensor]) -> tuple[Tensor, Tensor]:
        key = (tuple(tuple(m.shape[2:]) for m in maps), maps[0].device, maps[0].dtype, id(self.stride))
        if self._anchor_cache is None or self._anchor_cache[0] != key:
            # plain numbers when known (set_strides): no device sync, and nothing data-dependent to trace
            points, strides = make_anchors(maps, self.stride_values or self.stride, 0.5)
            self._anchor_cache = (key, points.transpose(0, 1), strides.transpose(0, 1))
        return self._anchor_cache[1], self._anchor_cache[2]

    def decode(self, maps: list[Tensor], dfl: DFL) -> Tensor:
        """Raw maps of one branch -> `[B, 4 + nc, A]` (xywh pixels, sigmoid scores)."""
        batch = maps[0].shape[0]
        anchors, strides = self._anchors(maps)
        box, cls = torch.cat([m.view(batch, self.no, -1) for m in maps], 2).split((self.reg_max * 4, self.nc), 1)
        dbox = dist2bbox(dfl(box), anchors.unsqueeze(0), xywh=True, dim=1) * strides
        return torch.cat((dbox, cls.sigmoid()), 1)


class DDetect(_HeadBase):
    """Anchor-free decoupled head over `len(ch)` levels: a box branch (grouped convs) and a class branch."""

    def __init__(self, nc: int = 80, ch: tuple[int, ...] | list[int] = ()) -> None:
        super().__init__(nc, len(ch))
        c2, c3 = head_widths(ch[0], nc, self.reg_max)
        self.cv2 = nn.ModuleList(_box_branch(x, c2, self.reg_max) for x in ch)
        self.cv3 = nn.ModuleList(_cls_branch(x, c3, nc) for x in ch)
        self.dfl = DFL(self.reg_max)

    def forward_maps(self, x: list[Tensor]) -> list[Tensor]:
        """The raw maps `[B, 4*reg_max + nc, H, W]` per level, whatever the mode."""
        return [torch.cat((dense_grad(self.cv2[i](x[i])), dense_grad(self.cv3[i](x[i]))), 1) for i in range(self.nl)]

    def forward(self, x: list[Tensor]):
        maps = self.forward_maps(x)
        if self.training:
            return maps
        return self.decode(maps, self.dfl), maps

    def bias_init(self, strides: list[float] | None = None) -> None:
        """Official prior initialisation of the last box and class biases (strides default to `stride`)."""
        strides = self.stride.tolist() if strides is None else strides
        _init_branch_biases(self.cv2, self.cv3, strides, self.nc)


class DualDDetect(_HeadBase):
    """Two DDetect heads side by side: inputs `[aux levels..., main levels...]`.

    `cv2`/`cv3`/`dfl` serve the auxiliary (PGI) branch, `cv4`/`cv5`/`dfl2` the main branch; only the
    main branch survives conversion for inference.
    """

    def __init__(self, nc: int = 80, ch: tuple[int, ...] | list[int] = ()) -> None:
        super().__init__(nc, len(ch) // 2)
        nl = self.nl
        c2, c3 = head_widths(ch[0], nc, self.reg_max)
        c4, c5 = head_widths(ch[nl], nc, self.reg_max)
        self.cv2 = nn.ModuleList(_box_branch(x, c2, self.reg_max) for x in ch[:nl])
        self.cv3 = nn.ModuleList(_cls_branch(x, c3, nc) for x in ch[:nl])
        self.cv4 = nn.ModuleList(_box_branch(x, c4, self.reg_max) for x in ch[nl:])
        self.cv5 = nn.ModuleList(_cls_branch(x, c5, nc) for x in ch[nl:])
        self.dfl = DFL(self.reg_max)
        self.dfl2 = DFL(self.reg_max)

    def forward_maps(self, x: list[Tensor]) -> list[list[Tensor]]:
        """`[aux_maps, main_maps]`, raw, whatever the mode."""
        nl = self.nl
        aux = [torch.cat((dense_grad(self.cv2[i](x[i])), dense_grad(self.cv3[i](x[i]))), 1) for i in range(nl)]
        main = [torch.cat((dense_grad(self.cv4[i](x[nl + i])), dense_grad(self.cv5[i](x[nl + i]))), 1)
                for i in range(nl)]
        return [aux, main]

    def forward(self, x: list[Tensor]):
        aux, main = self.forward_maps(x)
        if self.training:
            return [aux, main]
        return self.decode(main, self.dfl2), [aux, main]

    def bias_init(self, strides: list[float] | None = None) -> None:
        """Official prior initialisation for both branches (strides default to `stride`)."""
        strides = self.stride.tolist() if strides is None else strides
        _init_branch_biases(self.cv2, self.cv3, strides, self.nc)
        _init_branch_biases(self.cv4, self.cv5, strides, self.nc)


HEAD_TYPES = (DDetect, DualDDetect)
