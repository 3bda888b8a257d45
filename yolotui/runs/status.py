"""status.json: written only by the supervisor, atomically; read by everyone, with the derived state.

Fields: name, run_dir, state, attempt, max_attempts, supervisor_pid, trainer_pid, started, updated, ended,
exit_code, exit_signal, failure_class, message, command, backend, device, attempts (history: one dict per attempt
with attempt, started, ended, exit_code, exit_signal, failure_class, message, remedy, changes) and
remedies (what was applied before the current attempt), stop (a stop request and the signals sent for it),
queue (what a queued run waits for, see yolotui.runs.queue) and slurm (job_id, restarts, nodes) for a run
submitted to SLURM, whose liveness is its job's state, not the lock.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from yolotui.runs import lock
from yolotui.runs.atomic import atomic_write_json, read_json
from yolotui.runs.layout import INTERRUPTED, LIVE_STATES, QUEUED, STATUS_JSON
from yolotui.runs.status_schema import status_problem, unreadable_line


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
    """The run's status as written, or None when there is no readable, well-typed status.json."""
    return read_status_checked(run_dir)[0]


def read_status_checked(run_dir: Path) -> tuple[RunStatus | None, str | None]:
    """(status, problem): the status, or None and one line saying why status.json cannot be used.

    The problem is None when the file is absent; else e.g. `unreadable: status.json: started: expected a
    number` (issue 14, item 7).
    """
    path = status_path(run_dir)
    if not path.exists():
        return None, None
    data = read_json(path)
    if data is None:
        return None, unreadable_line(STATUS_JSON, "not valid JSON")
    problem = status_problem(data)
    if problem is not None:
        return None, unreadable_line(STATUS_JSON, problem)
    return RunStatus.from_dict(data), None  # type: ignore[arg-type]


def write_status(run_dir: Path, status: RunStatus) -> None:
    """Atomically replace the run's status.json, stamping `updated`."""
    status.updated = time.time()
    atomic_write_json(status_path(run_dir), status.to_dict())


def write_status_resilient(run_dir: Path, status: RunStatus) -> str | None:
    """write_status that survives a full disk; returns a line saying what went wrong, or None.

    When the atomic write fails for lack of space, the record is rewritten in place into the blocks the old
    status.json already occupies (compact JSON, shorter than the indented file), so the final state (failed,
    class `disk`) still reaches the disk even when not one new block can be had (issue 14, item 12).
    """
    try:
        write_status(run_dir, status)
        return None
    except OSError as exc:
        first = f"cannot write {STATUS_JSON}: {exc.strerror or exc}"
    path = status_path(run_dir)
    data = json.dumps(status.to_dict(), separators=(",", ":"), sort_keys=True, default=str).encode()
    try:
        fd = os.open(path, os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return first
    try:
        if os.fstat(fd).st_size < len(data):
            return first + "; no room to rewrite it in place either"
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
        os.fsync(fd)
    except OSError as exc:
        return first + f"; in-place rewrite failed too ({exc.strerror or exc})"
    finally:
        os.close(fd)
    return first + "; rewritten in place"


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
