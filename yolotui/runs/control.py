"""Controlling a live run from any shell: stop it, or ask its trainer to write a checkpoint now.

Stop protocol (so a stopped run is recorded as `stopped`, never as a failure):

1. `stop()` writes RUN/stop.request (JSON: requested, force, grace_s, by) atomically. Nothing is signalled
   by the caller in the normal case, so no PID read from a file is ever trusted.
2. The supervisor sees the request within 0.1 s, records the state `stopping`, sends SIGTERM to the
   trainer's process group (SIGKILL at once with force), and SIGKILL to the group if it is still there
   after `grace_s`; the times of both are recorded in status.json's `stop` mapping. When the trainer has
   exited and its group is empty, the supervisor records `stopped` and exits. Because the supervisor does
   the signalling, the grace period is honoured even if the `yolotui stop` that asked is itself
   interrupted (Ctrl-C, a dropped SSH connection).
3. `stop()` (with wait=True) polls status.json until the run has ended and reports which signals were
   sent. Fallback: if the supervisor has not acknowledged the request within a few seconds, `stop()`
   signals the trainer's process group itself, guarded as below.

PID reuse guard (stop fallback and `save_now`): a process group is signalled only while the run's lock is
held (its supervisor is alive, so the trainer pid in status.json is current), and only if that pid is alive,
leads its own process group, and is a child of the recorded supervisor.

Stopping a run that is not running changes nothing and returns `was_running=False` with a message.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from yolotui.errors import UserError
from yolotui.runs import lock, procs
from yolotui.runs.atomic import atomic_write_json
from yolotui.runs.layout import LIVE_STATES, QUEUED, RUNNING, STOP_REQUEST, STOPPED, STOPPING
from yolotui.runs.runconfig import handles_save_signal, read_run_config
from yolotui.runs.status import RunStatus, effective_state, read_status, write_status

ACK_TIMEOUT_S = 3.0  # how long the supervisor gets to acknowledge a stop before we signal directly
POLL_S = 0.1


@dataclass
class StopResult:
    """How a stop went: whether the run was live, its state afterwards, which signals were sent."""

    run_dir: str
    name: str
    was_running: bool
    state: str
    term_sent: bool = False
    kill_sent: bool = False
    seconds: float | None = None
    pgid: int | None = None
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form."""
        return asdict(self)


@dataclass
class SaveResult:
    """A save-now request: the process group that got SIGUSR1."""

    run_dir: str
    name: str
    pgid: int
    message: str


def _name(run_dir: Path, status: RunStatus | None) -> str:
    return status.name if status is not None and status.name else Path(run_dir).name


def trainer_group(run_dir: Path, status: RunStatus | None = None) -> int | None:
    """The process group of the run's live trainer, or None; guarded against PID reuse (see module doc)."""
    run_dir = Path(run_dir)
    status = status if status is not None else read_status(run_dir)
    if status is None or not status.trainer_pid or not lock.is_held(run_dir):
        return None
    pid = int(status.trainer_pid)
    if not procs.is_alive(pid):
        return None
    try:
        if os.getpgid(pid) != pid:
            return None  # not a group leader: not the trainer the supervisor started
    except ProcessLookupError:
        return None
    parent = procs.parent_pid(pid)
    if parent is not None and status.supervisor_pid and parent != status.supervisor_pid:
        return None
    return pid


def request_stop(run_dir: Path, force: bool = False, grace_s: float = 30.0) -> None:
    """Write RUN/stop.request for the supervisor to act on."""
    if grace_s < 0:
        raise UserError(f"grace period must be 0 or more seconds (got {grace_s:g})")
    atomic_write_json(Path(run_dir) / STOP_REQUEST, {
        "requested": time.time(), "force": bool(force), "grace_s": float(grace_s),
        "by": f"yolotui stop (pid {os.getpid()})",
    })


def stop(run_dir: Path, force: bool = False, grace_s: float = 30.0, *, wait: bool = True,
         timeout_s: float | None = None) -> StopResult:
    """Stop a run: SIGTERM to its trainer's process group, SIGKILL after `grace_s` (at once with `force`).

    With `wait`, returns once the run has ended (or `timeout_s`, default grace + 30 s, has passed) and
    reports the signals sent; otherwise returns right after the request is written.
    """
    run_dir = Path(run_dir)
    status = read_status(run_dir)
    name = _name(run_dir, status)
    state = effective_state(run_dir, status)
    if state not in LIVE_STATES:
        return StopResult(str(run_dir), name, was_running=False, state=state,
                          message=f"run {name} is not running ({state}); nothing to stop")
    started = time.monotonic()
    if status is not None and status.slurm and status.slurm.get("job_id"):
        return _stop_slurm_job(run_dir, status, force, grace_s, wait, timeout_s)
    request_stop(run_dir, force, grace_s)
    pgid = trainer_group(run_dir, status)
    if not wait:
        return StopResult(str(run_dir), name, was_running=True, state=STOPPING, pgid=pgid,
                          message=f"stop of run {name} requested")

    deadline = started + (timeout_s if timeout_s is not None else grace_s + 30.0)
    direct_term: float | None = None
    direct_kill = False
    while True:
        status = read_status(run_dir)
        state = effective_state(run_dir, status)
        if status is not None and status.trainer_pid:
            pgid = int(status.trainer_pid)
        if state not in LIVE_STATES:
            break
        now = time.monotonic()
        if now >= deadline:
            break
        acknowledged = status is not None and status.state == STOPPING
        if not acknowledged and now - started >= ACK_TIMEOUT_S:
            group = trainer_group(run_dir, status)
            if group is not None and direct_term is None:
                procs.signal_group(group, signal.SIGKILL if force else signal.SIGTERM)
                direct_term, direct_kill = now, force
            elif group is not None and not direct_kill and now - direct_term >= grace_s:
                procs.signal_group(group, signal.SIGKILL)
                direct_kill = True
        time.sleep(POLL_S)

    seconds = time.monotonic() - started
    record = (status.stop if status is not None else None) or {}
    term_sent = bool(record.get("term_sent")) or (direct_term is not None and not force)
    kill_sent = bool(record.get("kill_sent")) or direct_kill
    result = StopResult(str(run_dir), name, was_running=True, state=state, term_sent=term_sent,
                        kill_sent=kill_sent, seconds=seconds, pgid=pgid)
    signals = []
    if term_sent:
        signals.append(f"SIGTERM to process group {pgid}")
    if kill_sent:
        signals.append(f"SIGKILL after {grace_s:g} s" if term_sent else f"SIGKILL to process group {pgid}")
    sent = f" ({'; '.join(signals)})" if signals else ""
    if state == STOPPED:
        result.message = f"run {name} stopped after {seconds:.1f} s{sent}"
    elif state in LIVE_STATES:
        result.message = (f"run {name} is still {state} after {seconds:.0f} s{sent}; "
                          f"try again with --force")
    else:
        result.message = f"run {name} ended as {state} after {seconds:.1f} s{sent}"
    return result


def _stop_slurm_job(run_dir: Path, status: RunStatus, force: bool, grace_s: float, wait: bool,
                    timeout_s: float | None) -> StopResult:
    """Stop a SLURM run: a queued job is cancelled; a running one gets stop.request and `scancel --batch
    --signal=TERM` (its supervisor stops the trainer: checkpoint, then the job ends), or a plain `scancel`
    with `force`. With `wait`, polls the job's state until the run has ended."""
    from yolotui.runs import slurm

    name = _name(run_dir, status)
    job = str(status.slurm["job_id"])
    started = time.monotonic()
    info = slurm.job_info(job, fresh=True)
    request_stop(run_dir, force, grace_s)  # read by the supervisor, should it be starting right now
    if info is not None and (info.pending or status.state == QUEUED):
        # nothing to checkpoint: the job waits in the queue, or its supervisor has not started yet
        slurm.scancel(job)
        why = f"while queued ({info.reason or info.state})" if info.pending else "before its supervisor started"
        status.state, status.ended = STOPPED, time.time()
        status.message = f"SLURM job {job} cancelled {why}"
        write_status(run_dir, status)
        return StopResult(str(run_dir), name, was_running=True, state=STOPPED, seconds=time.monotonic() - started,
                          message=f"run {name}: job {job} cancelled {why}")
    if force:
        slurm.scancel(job)
        how = f"scancel {job}"
    else:
        slurm.scancel(job, "TERM", batch=True)
        how = f"SIGTERM to job {job}'s supervisor (scancel --batch --signal=TERM)"
    if not wait:
        return StopResult(str(run_dir), name, was_running=True, state=STOPPING, term_sent=not force,
                          kill_sent=force, message=f"stop of run {name} requested ({how})")
    deadline = started + (timeout_s if timeout_s is not None else grace_s + 60.0)
    state = STOPPING
    while time.monotonic() < deadline:
        state = effective_state(run_dir)
        if state not in LIVE_STATES:
            break
        time.sleep(0.5)
    seconds = time.monotonic() - started
    result = StopResult(str(run_dir), name, was_running=True, state=state, term_sent=not force, kill_sent=force,
                        seconds=seconds)
    if state in LIVE_STATES:
        result.message = f"run {name} is still {state} after {seconds:.0f} s ({how}); try again with --force"
    else:
        result.message = f"run {name} {'stopped' if state == STOPPED else 'ended as ' + state} after " \
                         f"{seconds:.1f} s ({how})"
    return result


def save_now(run_dir: Path) -> SaveResult:
    """Ask the run's trainer to write a checkpoint now (SIGUSR1 to its process group) and go on training.

    UserError when the run is not running, or its command does not declare that it handles SIGUSR1 (a
    plain `yolotui exec` command would be killed by it).
    """
    run_dir = Path(run_dir)
    status = read_status(run_dir)
    name = _name(run_dir, status)
    state = effective_state(run_dir, status)
    if state != RUNNING:
        raise UserError(f"run {name} is not running ({state}); nothing to save", exit_code=1)
    config = read_run_config(run_dir)
    if not handles_save_signal(config):
        raise UserError(f"run {name} ({config.get('backend', 'exec')}) does not say its command writes a "
                        "checkpoint on SIGUSR1 (it would be killed by it); nothing sent", exit_code=1)
    if status is not None and status.slurm and status.slurm.get("job_id"):
        from yolotui.runs import slurm

        job = str(status.slurm["job_id"])
        atomic_write_json(Path(run_dir) / slurm.SAVE_REQUEST, {"requested": time.time(), "by": "yolotui save"})
        slurm.scancel(job, "USR1", batch=True)
        return SaveResult(str(run_dir), name, 0, f"asked run {name} to write a checkpoint now (save.request, then "
                                                 f"scancel --batch --signal=USR1 {job})")
    pgid = trainer_group(run_dir, status)
    if pgid is None:
        raise UserError(f"run {name} has no live trainer process right now; nothing sent", exit_code=1)
    procs.signal_group(pgid, signal.SIGUSR1)
    return SaveResult(str(run_dir), name, pgid,
                      f"asked run {name} to write a checkpoint now (SIGUSR1 to process group {pgid})")
