"""Fault injection for testing recovery: YOLOTUI_FAULT=KIND@step=K[:always] (a testing aid, not a feature).

Set in the environment of a training run, it makes the trainer fail the way real training fails, at the K-th
training batch that this trainer process runs (1-based, counted from the batch where this attempt started or
resumed), so the supervisor's classification and remedies can be exercised on a laptop:

    oom     raises torch.OutOfMemoryError with CUDA's "CUDA out of memory" text (as a GPU allocation does)
    comm    raises ConnectionResetError (as a dropped peer of a collective does)
    nan     makes the loss NaN from that batch on (the trainer gives up after a few non-finite steps)
    crash   raises RuntimeError (anything else)
    data    raises UserError naming a file and line (as bad data met at run time does)
    hang    stops making progress for good at that batch (as a deadlocked collective or a wedged driver does):
            it sleeps forever; signal handlers still set their flags but nothing acts on them, so only the
            supervisor's stall watchdog (SIGTERM, then SIGKILL) ends it

A fault fires on the first attempt only (YOLOTUI_ATTEMPT=1, the supervisor sets it), unless `:always` is
appended, then on every attempt: `YOLOTUI_FAULT=crash@step=2:always`. Several faults can be given separated
by commas; each fires at its own step.

YOLOTUI_STEP_DELAY_S=S (also a testing aid) sleeps S seconds before every training batch of the first attempt,
so a tiny run lasts long enough for an outside event (a SLURM time-limit signal) to meet it mid-training, and
its resumed attempts run at full speed; the math is unchanged.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from yolotui.errors import UserError

ENV_VAR = "YOLOTUI_FAULT"
DELAY_VAR = "YOLOTUI_STEP_DELAY_S"
KINDS = ("oom", "comm", "nan", "crash", "data", "hang")


@dataclass(frozen=True)
class Fault:
    """One injected failure: what, at which batch of the attempt, and whether on every attempt."""

    kind: str
    step: int
    always: bool = False


def parse_faults(text: str | None) -> list[Fault]:
    """Parse a YOLOTUI_FAULT value; UserError naming the variable on a malformed entry."""
    faults: list[Fault] = []
    for raw in (text or "").split(","):
        entry = raw.strip()
        if not entry:
            continue
        always = False
        if entry.endswith(":always"):
            always, entry = True, entry[: -len(":always")]
        elif entry.endswith(":once"):
            entry = entry[: -len(":once")]
        kind, sep, where = entry.partition("@")
        kind = kind.strip().lower()
        key, eq, value = where.partition("=")
        if kind not in KINDS or not sep or key.strip() != "step" or not eq or not value.strip().isdigit() \
                or int(value) < 1:
            raise UserError(f"{ENV_VAR}={text!r}: expected KIND@step=K[:always] with KIND one of "
                            f"{', '.join(KINDS)} and K >= 1, e.g. oom@step=5")
        faults.append(Fault(kind, int(value), always))
    return faults


class FaultInjector:
    """Counts the batches of this attempt and raises (or poisons the loss) where a fault is due."""

    def __init__(self, faults: list[Fault], attempt: int) -> None:
        self.active = [f for f in faults if f.always or attempt <= 1]
        self.steps_run = 0
        self.poison_loss = False
        try:
            self.delay_s = max(0.0, float(os.environ.get(DELAY_VAR) or 0.0)) if attempt <= 1 else 0.0
        except ValueError:
            raise UserError(f"{DELAY_VAR}={os.environ.get(DELAY_VAR)!r}: give seconds as a number") from None

    @classmethod
    def from_env(cls, attempt: int | None = None) -> FaultInjector:
        """The injector YOLOTUI_FAULT and YOLOTUI_ATTEMPT ask for (inactive when the variable is unset)."""
        if attempt is None:
            value = os.environ.get("YOLOTUI_ATTEMPT", "1")
            attempt = int(value) if value.isdigit() else 1
        return cls(parse_faults(os.environ.get(ENV_VAR)), attempt)

    def before_step(self) -> None:
        """Call before each training batch: counts it and fires the faults due at it."""
        self.steps_run += 1
        if self.delay_s:
            time.sleep(self.delay_s)
        for fault in self.active:
            if fault.step == self.steps_run:
                self._fire(fault)

    def _fire(self, fault: Fault) -> None:
        where = f"injected by {ENV_VAR} at batch {self.steps_run} of this attempt"
        if fault.kind == "nan":
            self.poison_loss = True
            return
        if fault.kind == "oom":
            import torch

            raise torch.OutOfMemoryError(
                "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 0 bytes "
                f"({where})")
        if fault.kind == "comm":
            raise ConnectionResetError(104, f"Connection reset by peer ({where})")
        if fault.kind == "hang":
            import time

            print(f"yolotui: hang {where}", flush=True)
            while True:
                time.sleep(3600)
        if fault.kind == "data":
            raise UserError(f"{ENV_VAR}.txt line 1: bad label row ({where})")
        raise RuntimeError(f"crash {where}")

    def loss(self, value):
        """The loss to use: NaN (keeping the graph) once a `nan` fault has fired, else `value`."""
        if self.poison_loss:
            return value * float("nan")
        return value
