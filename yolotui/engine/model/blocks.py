"""GELAN building blocks: RepNBottleneck, RepNCSP, ELAN1, RepNCSPELAN4 and SPPELAN (with its pool SP)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from yolotui.engine.model.conv import Conv, RepConvN


class SP(nn.Module):
    """Stride-1 max pool with 'same' padding (the pyramid pooling step of SPPELAN)."""

    def __init__(self, k: int = 3, s: int = 1) -> None:
        super().__init__()
        self.m = nn.MaxPool2d(kernel_size=k, stride=s, padding=k // 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.m(x)


class RepNBottleneck(nn.Module):
    """RepConvN then Conv, with a residual connection when input and output widths agree."""

    def __init__(self, c1: int, c2: int, shortcut: bool = True, g: int = 1, k: tuple[int, int] = (3, 3),
                 e: float = 0.5) -> None:
        super().__init__()
        hidden = int(c2 * e)
        self.cv1 = RepConvN(c1, hidden, k[0], 1)
        self.cv2 = Conv(hidden, c2, k[1], 1, g=g)
        self.add = shortcut and c1 == c2

    def forward(self, x: Tensor) -> Tensor:
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class RepNCSP(nn.Module):
    """CSP block: two 1x1 paths, one through `n` RepNBottlenecks, concatenated and mixed by a 1x1 Conv."""

    def __init__(self, c1: int, c2: int, n: int = 1, shortcut: bool = True, g: int = 1, e: float = 0.5) -> None:
        super().__init__()
        hidden = int(c2 * e)
        self.cv1 = Conv(c1, hidden, 1, 1)
        self.cv2 = Conv(c1, hidden, 1, 1)
        self.cv3 = Conv(2 * hidden, c2, 1)
        self.m = nn.Sequential(*(RepNBottleneck(hidden, hidden, shortcut, g, e=1.0) for _ in range(n)))

    def forward(self, x: Tensor) -> Tensor:
        return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))


class ELAN1(nn.Module):
    """ELAN block of the tiny/small models: split a 1x1 projection, chain two 3x3 Convs, concatenate all."""

    def __init__(self, c1: int, c2: int, c3: int, c4: int) -> None:
        super().__init__()
        self.c = c3 // 2
        self.cv1 = Conv(c1, c3, 1, 1)
        self.cv2 = Conv(c3 // 2, c4, 3, 1)
        self.cv3 = Conv(c4, c4, 3, 1)
        self.cv4 = Conv(c3 + 2 * c4, c2, 1, 1)

    def forward(self, x: Tensor) -> Tensor:
        parts = list(self.cv1(x).chunk(2, 1))
        parts.append(self.cv2(parts[-1]))
        parts.append(self.cv3(parts[-1]))
        return self.cv4(torch.cat(parts, 1))


class RepNCSPELAN4(nn.Module):
    """GELAN block: like ELAN1, but each chained stage is a RepNCSP (c5 bottlenecks) followed by a 3x3 Conv."""

    def __init__(self, c1: int, c2: int, c3: int, c4: int, c5: int = 1) -> None:
        super().__init__()
        self.c = c3 // 2
        self.cv1 = Conv(c1, c3, 1, 1)
        self.cv2 = nn.Sequential(RepNCSP(c3 // 2, c4, c5), Conv(c4, c4, 3, 1))
        self.cv3 = nn.Sequential(RepNCSP(c4, c4, c5), Conv(c4, c4, 3, 1))
        self.cv4 = Conv(c3 + 2 * c4, c2, 1, 1)

    def forward(self, x: Tensor) -> Tensor:
        parts = list(self.cv1(x).chunk(2, 1))
        parts.append(self.cv2(parts[-1]))
        parts.append(self.cv3(parts[-1]))
        return self.cv4(torch.cat(parts, 1))


class SPPELAN(nn.Module):
    """Spatial pyramid pooling, ELAN style: a 1x1 Conv, three chained 5x5 max pools, concatenate, 1x1 Conv."""

    def __init__(self, c1: int, c2: int, c3: int) -> None:
        super().__init__()
        self.c = c3
        self.cv1 = Conv(c1, c3, 1, 1)
        self.cv2 = SP(5)
        self.cv3 = SP(5)
        self.cv4 = SP(5)
        self.cv5 = Conv(4 * c3, c2, 1, 1)

    def forward(self, x: Tensor) -> Tensor:
        parts = [self.cv1(x)]
        for pool in (self.cv2, self.cv3, self.cv4):
            parts.append(pool(parts[-1]))
        return self.cv5(torch.cat(parts, 1))
