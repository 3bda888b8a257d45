"""How the training loop spends an epoch: waiting for the next batch from the data loader, or computing.

`LoopTiming.wrap(loader)` yields the loader's batches and adds up, per epoch, the time spent inside the
loader's `next()` (data wait) and the time from receiving a batch to asking for the next one (compute: the
step, which ends with the losses copied to the host, so the GPU's work is finished within it, plus the loop's
bookkeeping). `fields()` is what the epoch event records as `loop`; yolotui/telemetry/slowness.py turns it into
the "data-bound" verdict. No torch here.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any


class LoopTiming:
    """Data-wait and compute seconds of one epoch's loop."""

    def __init__(self) -> None:
        self.data_wait_s = 0.0
        self.compute_s = 0.0
        self.steps = 0
        self._received: float | None = None

    def wrap(self, batches: Iterable[Any]) -> Iterator[Any]:
        """Yield from `batches`, timing the waits and the work between them."""
        iterator = iter(batches)
        while True:
            asked = time.perf_counter()
            if self._received is not None:
                self.compute_s += asked - self._received
            try:
                batch = next(iterator)
            except StopIteration:
                self._received = None
                return
            self._received = time.perf_counter()
            self.data_wait_s += self._received - asked
            self.steps += 1
            yield batch

    def fields(self, **extra: Any) -> dict[str, Any]:
        """{'data_wait_s', 'compute_s', 'steps', 'data_wait_pct'} plus `extra` (workers, cache), for the epoch event."""
        total = self.data_wait_s + self.compute_s
        return {"data_wait_s": round(self.data_wait_s, 4), "compute_s": round(self.compute_s, 4),
                "steps": self.steps, "data_wait_pct": round(100.0 * self.data_wait_s / total, 1) if total else None,
                **extra}
