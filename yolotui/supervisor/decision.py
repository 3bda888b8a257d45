"""What the restart policy decides after an attempt (Decision), the failure classes, and the backoff rule.

Shared by yolotui.supervisor.policy (which classifies and decides) and yolotui.supervisor.remedies (which plans the
remedy for a failure class); neither imports the other's caller, so there is no import circle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from yolotui.runs.layout import FAILED

# Failure classes (docs/architecture.md, "Failure classes").
OOM = "oom"
COMM = "comm"
NAN = "nan"
DATA = "data"
KILLED = "killed"
CRASH = "crash"
HANG = "hang"  # no progress: the stall watchdog stopped the trainer (yolotui/supervisor/watchdog.py)
HOST_OOM = "host-oom"  # SIGKILL from the kernel's OOM killer (yolotui/supervisor/hostoom.py)
DISK = "disk"  # out of disk space or quota: never retried
GPU_FAULT = "gpu-fault"  # a crash after an Xid or a lost GPU: moved to another GPU or stopped (supervisor/gpu_monitor.py)
PREEMPTED = "preempted"  # the machine is going away (SIGTERM from outside, a notice): checkpointed, resumable


@dataclass
class Decision:
    """What to do after an attempt ended.

    `state` is the state to record when not retrying (finished, stopped or failed); `changes` are the
    command/env changes this remedy adds for the next attempt; `remedy` says in words what will be done.
    """

    retry: bool
    delay_s: float = 0.0
    changes: dict[str, Any] = field(default_factory=dict)
    remedy: str = ""
    failure_class: str | None = None
    state: str = FAILED
    message: str = ""
    settings: dict[str, Any] = field(default_factory=dict)  # what the remedy changed: {name: [was, now]}
    counted: bool = True  # False: a retry on its class's own budget (comm), not counted against max_attempts




def backoff_delay(attempt: int, base_s: float, max_s: float) -> float:
    """Seconds to wait before attempt `attempt + 1`: doubling from `base_s`, capped at `max_s`."""
    return min(max_s, base_s * (2 ** max(0, attempt - 1)))
