"""status.json: written only by the supervisor, atomically; read by everyone, with the derived state.

Fields: name, run_dir, state, attempt, max_attempts, supervisor_pid, trainer_pid, started (the run's FIRST
start: a resume keeps it), earlier_seconds (wall time of the attempts of earlier supervisors: before the latest
resume), launching (a launcher wrote it; its supervisor is starting), updated, ended,
exit_code, exit_signal, failure_class, message, command, backend, device, attempts (history: one dict per attempt
with attempt, started, ended, exit_code, exit_signal, failure_class, message, remedy, changes) and
remedies (what was applied before the current attempt), stop (a stop request and the signals sent for it),
queue (what a queued run waits for, see yolotui.placement.queue), slurm (job_id, restarts, nodes) for a run
submitted to SLURM, whose liveness is its job's state, not the lock, notifications (how many were sent
and failed, and the last error), gpu_summary (one entry per attempt: time throttled and why, lowest clock,
peak temperature, new ECC errors, energy, Xids; yolotui/telemetry/gpu_summary.py), and mirror (a mirrored run's
copies: target, state, copies, failures, last_ok, last_ok_epoch/step, last_error, slow; yolotui/mirror/driver.py).
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
    earlier_seconds: float = 0.0
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
    launching: bool = False  # written by a launcher before its supervisor starts (see state_of)
    stop: dict[str, Any] | None = None  # a stop in progress or done: requested, force, grace_s, term_sent, kill_sent
    notifications: dict[str, Any] | None = None  # sent, failed, last_error (yolotui/notify/notifier.py)
    # a queued run's wait (yolotui.placement.queue): spec, reason, since, waiting_on, gpus, claimed, started
    queue: dict[str, Any] | None = None
    slurm: dict[str, Any] | None = None  # a SLURM run: job_id, restarts, nodes (yolotui/placement/slurm.py)
    # per attempt of this supervisor: what the GPU cost the run (yolotui/telemetry/gpu_summary.py)
    gpu_summary: list[dict[str, Any]] | None = None
    mirror: dict[str, Any] | None = None  # the run's mirror: target, state, last_ok, last_error (yolotui/mirror/driver.py)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunStatus:
        """Build from a parsed status.json, ignoring keys this version does not know."""
        known = {name for name in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form."""
        return asdict(self)


def attempt_seconds(attempts: list[dict[str, Any]], end_of_open: float | None) -> float | None:
    """Wall time of `attempts` (sum of ended - started); an attempt with no end counts up to `end_of_open`
    (None: it is skipped). None when no attempt records a start."""
    total, counted = 0.0, False
    for record in attempts:
        if not isinstance(record, dict) or not isinstance(record.get("started"), (int, float)):
            continue
        end = record.get("ended") if isinstance(record.get("ended"), (int, float)) else end_of_open
        if end is None:
            continue
        total += max(0.0, float(end) - float(record["started"]))
        counted = True
    return total if counted else None


def elapsed_seconds(status: RunStatus, now: float, live: bool) -> float | None:
    """Time spent running: the sum over attempts, earlier supervisors' attempts included (resumes do not count
    the time the run lay stopped). Falls back to ended/now - started when no attempt records its times."""
    end_of_open = now if live else (status.ended or status.updated)
    spent = attempt_seconds(list(status.attempts or []), end_of_open)
    if spent is None:
        if not status.started:
            return None
        end = status.ended if status.ended and not live else now
        return max(0.0, end - status.started)
    return (status.earlier_seconds or 0.0) + spent


def status_path(run_dir: Path) -> Path:
    """Where a run's status.json lives."""
    return Path(run_dir) / STATUS_JSON


def read_status(run_dir: Path) -> RunStatus | None:
    """The run's status as written, or None when there is no readable, well-typed status.json."""
    return read_status_checked(run_dir)[0]


def read_status_checked(run_dir: Path) -> tuple[RunStatus | None, str | None]:
    """(status, problem): the status, or None and one line saying why status.json cannot be used.

    The problem is None when the file is absent; else e.g. `unreadable: status.json: started: expected a
    number`.
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
    class `disk`) still reaches the disk even when not one new block can be had.
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


# A launcher writes `queued` (with no supervisor pid yet) a moment before its supervisor takes the lock (it
# waits up to 2 s for it): such a status younger than this, whose lock nobody took since, is a run starting
# (a deliberate resume), not a supervisor that died. Once a supervisor took the lock (lock.taken_at) or wrote
# its own status (it names its pid), a free lock means interrupted at once.
QUEUED_GRACE_S = 10.0


def state_of(run_dir: Path, recorded: str | None, slurm_job: str | None = None, *, updated: float | None = None,
             supervisor_pid: int | None = None, launching: bool = False) -> str:
    """The one "interrupted" rule: a recorded live state (or none at all) whose lock is free is `interrupted`;
    no status yet but the lock held is `queued`; a `queued` status that a launcher wrote (`launching`, no
    `supervisor_pid`)
    in the last QUEUED_GRACE_S seconds (`updated`), whose lock was not taken since, stays `queued` while its
    supervisor starts. A SLURM run (`slurm_job`) takes its liveness from the job's state instead of the lock
    (yolotui/placement/slurm.py), since the lock is held on another machine."""
    if slurm_job:
        from yolotui.runs import slurm_state as slurm

        return slurm.derived_state(recorded, slurm_job)
    if recorded is None:
        return QUEUED if lock.is_held(Path(run_dir)) else INTERRUPTED
    if recorded in LIVE_STATES and not lock.is_held(Path(run_dir)):
        if (recorded == QUEUED and launching and not supervisor_pid and isinstance(updated, (int, float))
                and 0 <= time.time() - updated < QUEUED_GRACE_S):
            taken = lock.taken_at(Path(run_dir))
            if taken is None or taken < updated:
                return QUEUED
        return INTERRUPTED
    return recorded


def effective_state(run_dir: Path, status: RunStatus | None = None) -> str:
    """The state to show: a live state whose supervisor no longer holds the lock is `interrupted`.

    A SLURM run's liveness is its job's state (yolotui/placement/slurm.py), not the lock.
    """
    status = status if status is not None else read_status(run_dir)
    if status is None:
        return state_of(run_dir, None)
    state = state_of(run_dir, status.state, slurm_job_of(status), updated=status.updated,
                     supervisor_pid=status.supervisor_pid, launching=bool(status.launching))
    if state == INTERRUPTED and status.state in LIVE_STATES:
        # The status was read before the lock was looked at: a supervisor that wrote its final state and
        # exited in between left a free lock beside a stale live state. It always writes the end before it
        # lets go of the lock, so a second read, after the lock was seen free, is the truth.
        fresh = read_status(run_dir)
        if fresh is not None and fresh.state != status.state and fresh.state not in LIVE_STATES:
            return state_of(run_dir, fresh.state, slurm_job_of(fresh))
    return state


def slurm_job_of(status: RunStatus | dict | None) -> str | None:
    """The SLURM job id recorded in a status (or a status.json mapping), or None for a local run."""
    slurm = status.get("slurm") if isinstance(status, dict) else getattr(status, "slurm", None)
    return str(slurm["job_id"]) if isinstance(slurm, dict) and slurm.get("job_id") else None
