"""DeterministicSampler: the epoch's sample order as a pure function of (seed, epoch, rank, world size)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
from torch.utils.data import Sampler

_ORDER_STREAM = 0x0D3  # tells the sampler's generator apart from the samples'


class DeterministicSampler(Sampler):
    """Shuffled (or in-order) indices for one rank; every rank gets ceil(n / world_size) of them.

    Without drop_last the order is padded by wrapping around, so ranks stay in step (as
    DistributedSampler does); with drop_last the tail that does not divide is dropped.
    `skip(k)` leaves out this rank's first k samples of the next iteration only (resume mid-epoch);
    `len()` stays the full per-rank count so batch numbering does not shift. With `tag = (epoch, mosaic)` set,
    indices come as `(epoch, mosaic, index)` tuples (YoloDataset reads those), so a sample's epoch travels with
    it to whichever worker process loads it.
    """

    def __init__(self, n: int, seed: int = 0, shuffle: bool = True, rank: int = 0, world_size: int = 1,
                 drop_last: bool = False) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} outside [0, {world_size})")
        self.n = int(n)
        self.seed = int(seed)
        self.shuffle = shuffle
        self.rank = rank
        self.world_size = world_size
        self.drop_last = drop_last
        self.epoch = 0
        self._skip = 0
        self.tag: tuple[int, bool] | None = None

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose order the next iteration yields (a pending skip is kept)."""
        self.epoch = int(epoch)

    def skip(self, k_samples: int) -> None:
        """Leave out this rank's first `k_samples` samples in the next iteration only."""
        if k_samples < 0:
            raise ValueError("cannot skip a negative number of samples")
        self._skip = int(k_samples)

    def order(self) -> np.ndarray:
        """This rank's full index order for the current epoch."""
        if self.shuffle:
            rng = np.random.default_rng([self.seed & 0xFFFFFFFFFFFF, self.epoch, _ORDER_STREAM])
            order = rng.permutation(self.n)
        else:
            order = np.arange(self.n)
        total = len(self) * self.world_size
        if total > self.n and self.n:
            order = np.resize(order, total)  # wraps around from the start
        return order[self.rank:total:self.world_size]

    def __iter__(self) -> Iterator[int]:
        skip, self._skip = self._skip, 0
        order = self.order()[skip:].tolist()
        if self.tag is None:
            return iter(order)
        epoch, mosaic = self.tag
        return iter([(epoch, mosaic, i) for i in order])

    def __len__(self) -> int:
        if self.drop_last:
            return self.n // self.world_size
        return math.ceil(self.n / self.world_size)
