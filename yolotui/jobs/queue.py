"""Queueing a new run: turn --after RUN / --after-ok / --when-free [MEM] into run.yaml's `queue` section.

The waiting itself is the run's supervisor's (yolotui.placement.queue). Torch-free and UI-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class QueueRequest:
    """What a new run waits for: `after` a run (name or folder; with `after_ok` only if it finished) and/or
    `when_free` GPUs ('' for idle GPUs, or an amount such as '20G'). All None/False: start at once."""

    after: str | None = None
    after_ok: bool = False
    when_free: str | None = None

    def wanted(self) -> bool:
        """True when the run is to wait for something."""
        return self.after is not None or self.when_free is not None or self.after_ok


def resolve_after(request: QueueRequest | None) -> Path | None:
    """The folder of the run to wait for (UserError naming it when unknown); None when there is none."""
    if request is None or request.after is None:
        return None
    from yolotui.runs.resolve import resolve_run

    return resolve_run(request.after)


def queue_spec(request: QueueRequest | None, device: str | None, after: Path | None = None) -> dict[str, Any] | None:
    """run.yaml's `queue` section for `request` and the run's --device; None to start at once."""
    if request is None or not request.wanted():
        return None
    from yolotui.placement.queue import make_spec

    if after is None:
        after = resolve_after(request)
    return make_spec(after=after, after_ok=request.after_ok, when_free=request.when_free, device=device)


def describe_spec(spec: dict[str, Any] | None) -> str:
    """'waiting: after exp1 ends, GPU 0 20 GiB free' for the launch output; '' when not queued."""
    if not spec:
        return ""
    from yolotui.placement.queue import describe

    return f"queued: starts {describe(spec)}"
