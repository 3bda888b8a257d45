"""Classify why training failed into the supervisor's classes: oom, comm, nan, data, disk, crash
(docs/architecture.md, "Failure classes").

`classify_exception(exc)` looks at the exception type and, because many failures reach Python as a plain
RuntimeError (CUDA and NCCL errors, an exception re-raised from a DataLoader worker process), at the text of
the whole exception chain. The trainer reports the result as an `error` event before it exits nonzero; the
supervisor picks the remedy from the class (yolotui/supervisor/remedies.py).

`NanGuard` turns "the loss is not finite" into the `nan` class only when it persists for several consecutive
steps (a single overflow under mixed precision is normal and skipped), and tells the trainer when its state is
suspect so no checkpoint is written from it.
"""

from __future__ import annotations

import errno
import os

from yolotui.errors import UserError
from yolotui.failure_text import classify_text

OOM, COMM, NAN, DATA, CRASH, DISK = "oom", "comm", "nan", "data", "crash", "disk"

_COMM_TYPES = ("DistBackendError", "DistNetworkError", "DistStoreError", "DistError")

NAN_STEPS_DEFAULT = 3  # consecutive non-finite losses before the run is declared diverged


class NonFiniteLoss(RuntimeError):
    """The loss stayed NaN or infinite for several consecutive steps."""


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def classify_exception(exc: BaseException) -> str:
    """The failure class of `exc`: oom, comm, nan, data or crash."""
    chain = _chain(exc)
    names = [type(e).__name__ for e in chain]
    text = " ".join(f"{type(e).__name__}: {e}" for e in chain).lower()
    if type(exc).__name__ == "NonFiniteLoss":
        return NAN
    if isinstance(exc, UserError) or "caught usererror" in text:
        return DATA
    by_text = classify_text(text)
    if any(isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT) for e in chain) \
            or "no space left on device" in text:
        return DISK
    if by_text == OOM:  # CUDA/cuDNN memory only: a host allocation failure is a crash
        return OOM
    if any(isinstance(e, ConnectionError) for e in chain) or any(name in _COMM_TYPES for name in names) \
            or by_text == COMM or any(word in text for word in ("nccl", "gloo", "c10d")):
        return COMM
    return CRASH


def failure_message(exc: BaseException, kind: str) -> str:
    """A one-line message for the error event: the user's message for data errors, else type and first line."""
    text = str(exc).strip()
    if kind == DATA and isinstance(exc, UserError) and "caught usererror" not in text.lower():
        return text
    if kind == DATA and "caught usererror" in text.lower():
        # a UserError re-raised from a DataLoader worker: its own message is the last non-empty line
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        text = lines[-1] if lines else text
        return text.split("UserError: ", 1)[-1]
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def nan_steps_limit() -> int:
    """Consecutive non-finite losses tolerated (YOLOTUI_NAN_STEPS, default 3)."""
    value = os.environ.get("YOLOTUI_NAN_STEPS", "")
    return max(1, int(value)) if value.isdigit() else NAN_STEPS_DEFAULT


class NanGuard:
    """Counts consecutive non-finite losses; raises NonFiniteLoss when they reach the limit."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = nan_steps_limit() if limit is None else max(1, int(limit))
        self.streak = 0

    @property
    def suspect(self) -> bool:
        """True while the latest loss was not finite: no checkpoint may be written from this state."""
        return self.streak > 0

    def check(self, finite: bool, where: str) -> bool:
        """Record one step's loss; True when the step may proceed (finite), False to skip it; raises at the limit."""
        if finite:
            self.streak = 0
            return True
        self.streak += 1
        if self.streak >= self.limit:
            raise NonFiniteLoss(f"loss not finite for {self.streak} consecutive steps (last at {where})")
        return False
