"""status.json: written only by the supervisor, atomically; read by everyone, with the derived state.

Fields: name, run_dir, state, attempt, max_attempts, supervisor_pid, trainer_pid, started, updated, ended,
exit_code, exit_signal, failure_class, message, command, backend, device, attempts (history: one dict per attempt
with attempt, started, ended, exit_code, exit_signal, failure_class, message, remedy, changes) and
remedies (what was applied before the current attempt), stop (a stop request and the signals sent for it),
queue (what a queued run waits for, see yolotui.runs.queue), slurm (job_id, restarts, nodes) for a run
submitted to SLURM, whose liveness is its job's state, not the lock, and notifications (how many were sent
and failed, and the last error).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from yolotui.runs import lock
from yolotui.runs.atomic import atomic_write_json, read_json
from yolotui.runs.layout import INTERRUPTED, LIVE_STATES, QUEUED, STATUS_JSON


@dataclass
class RunStatus:
    """The supervisor's record of a run; `state` here is as written, see `effective_state`."""

    name: str = ""
    run_dir: str = ""
    state: str = QUEUED
    attempt: int = 0
    max_attempts: int = 1
    supervisor_pid: int | None = None
    trainer_pid: int | None = None
    started: float | None = None
    updated: float | None = None
    ended: float | None = None
    exit_code: int | None = None
    exit_signal: int | None = None
    failure_class: str | None = None
    message: str | None = None
    command: list[str] = field(default_factory=list)
    backend: str = "exec"
    device: str | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)
    remedies: list[dict[str, Any]] = field(default_factory=list)
    stop: dict[str, Any] | None = None  # a stop in progress or done: requested, force, grace_s, term_sent, kill_sent
    notifications: dict[str, Any] | None = None  # sent, failed, last_error (yolotui/runs/notify.py)
    # a queued run's wait (yolotui.runs.queue): spec, reason, since, waiting_on, gpus, claimed, started
    queue: dict[str, Any] | None = None
    slurm: dict[str, Any] | None = None  # a SLURM run: job_id, restarts, nodes (yolotui/runs/slurm.py)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunStatus:
        """Build from a parsed status.json, ignoring keys this version does not know."""
        known = {name for name in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form."""
        return asdict(self)


def status_path(run_dir: Path) -> Path:
    """Where a run's status.json lives."""
    return Path(run_dir) / STATUS_JSON


def read_status(run_dir: Path) -> RunStatus | None:
    """The run's status as written, or None when there is no readable status.json."""
    data = read_json(status_path(run_dir))
    if not isinstance(data, dict):
        return None
    return RunStatus.from_dict(data)


def write_status(run_dir: Path, status: RunStatus) -> None:
    """Atomically replace the run's status.json, stamping `updated`."""
    status.updated = time.time()
    atomic_write_json(status_path(run_dir), status.to_dict())


def state_of(run_dir: Path, recorded: str | None, slurm_job: str | None = None) -> str:
    """The one "interrupted" rule: a recorded live state (or none at all) whose lock is free is `interrupted`;
    no status yet but the lock held is `queued`. A SLURM run (`slurm_job`) takes its liveness from the job's
    state instead of the lock (yolotui/runs/slurm.py), since the lock is held on another machine."""
    if slurm_job:
        from yolotui.runs import slurm

        return slurm.derived_state(recorded, slurm_job)
    if recorded is None:
        return QUEUED if lock.is_held(Path(run_dir)) else INTERRUPTED
    if recorded in LIVE_STATES and not lock.is_held(Path(run_dir)):
        return INTERRUPTED
    return recorded


def effective_state(run_dir: Path, status: RunStatus | None = None) -> str:
    """The state to show: a live state whose supervisor no longer holds the lock is `interrupted`.

    A SLURM run's liveness is its job's state (yolotui/runs/slurm.py), not the lock.
    """
    status = status if status is not None else read_status(run_dir)
    return state_of(run_dir, status.state if status is not None else None, slurm_job_of(status))


def slurm_job_of(status: RunStatus | dict | None) -> str | None:
    """The SLURM job id recorded in a status (or a status.json mapping), or None for a local run."""
    slurm = status.get("slurm") if isinstance(status, dict) else getattr(status, "slurm", None)
    return str(slurm["job_id"]) if isinstance(slurm, dict) and slurm.get("job_id") else None
