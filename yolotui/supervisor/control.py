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
import shlex
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from yolotui import procs
from yolotui.errors import UserError
from yolotui.runs import lock
from yolotui.runs.atomic import atomic_write_json
from yolotui.runs.layout import LIVE_STATES, LOCK_FILE, QUEUED, RUNNING, STOP_REQUEST, STOPPED, STOPPING
from yolotui.runs.runconfig import handles_save_signal, read_run_config
from yolotui.runs.status import RunStatus, effective_state, read_status, write_status
from yolotui.runs.stoprequest import check_grace, read_stop_request, write_stop_request

ACK_TIMEOUT_S = 3.0  # how long the supervisor gets to acknowledge a stop before we signal directly
POLL_S = 0.1
STARTUP_WAIT_S = 1.5  # how long a stop of a run that is not live waits for a start-up under way to show


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
    """Write RUN/stop.request for the supervisor to act on (UserError for a NaN, infinite or negative grace)."""
    write_stop_request(Path(run_dir) / STOP_REQUEST, force, grace_s, f"yolotui stop (pid {os.getpid()})")


def _lock_writer(pid: int, run_dir: Path) -> bool:
    """True when `pid` holds RUN/.lock open for writing (a claimer, supervisor or trainer; not a reader's probe)."""
    target = os.stat(Path(run_dir) / LOCK_FILE)
    fd_dir = Path("/proc") / str(pid) / "fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return False
    for fd in fds:
        try:
            st = os.stat(fd_dir / fd)
            if (st.st_dev, st.st_ino) != (target.st_dev, target.st_ino):
                continue
            flags = (Path("/proc") / str(pid) / "fdinfo" / fd).read_text().split("flags:", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if int(flags, 8) & os.O_ACCMODE != os.O_RDONLY:
            return True
    return False


def orphaned_processes(run_dir: Path, status: RunStatus | None = None) -> list[int]:
    """The run's live processes when its supervisor is gone (a trainer that kept the lock); [] otherwise.

    These are the processes that hold the run's lock open for writing; none of them is the supervisor named
    in status.json.
    """
    run_dir = Path(run_dir)
    if not lock.is_held(run_dir):
        return []
    try:
        holding = [pid for pid in lock.holders(run_dir) if _lock_writer(pid, run_dir)]
    except OSError:
        return []
    status = status if status is not None else read_status(run_dir)
    supervisor = status.supervisor_pid if status is not None else None
    if supervisor and supervisor in holding and procs.is_alive(supervisor):
        return []
    claimer = lock.owner_pid(run_dir)
    if claimer is not None and claimer in holding:
        return []  # a launch or resume is starting: it holds the lock and hands it to its supervisor
    return holding


def stop_orphans(run_dir: Path, pids: list[int], force: bool, grace_s: float, timeout_s: float) -> StopResult:
    """Stop processes that outlived their supervisor: SIGTERM to their groups, SIGKILL after the grace."""
    run_dir = Path(run_dir)
    status = read_status(run_dir)
    name = _name(run_dir, status)
    started = time.monotonic()
    groups = sorted({_group_of(pid) for pid in pids} - {None})  # type: ignore[arg-type]
    for group in groups:
        procs.signal_group(group, signal.SIGKILL if force else signal.SIGTERM)
    kill_sent = force
    deadline = started + timeout_s
    while lock.is_held(run_dir) and time.monotonic() < deadline:
        if not kill_sent and time.monotonic() - started >= grace_s:
            for group in groups:
                procs.signal_group(group, signal.SIGKILL)
            kill_sent = True
        time.sleep(POLL_S)
    seconds = time.monotonic() - started
    state = effective_state(run_dir)
    listed = ", ".join(str(pid) for pid in pids)
    what = f"SIGTERM{' then SIGKILL' if kill_sent and not force else ''}" if not force else "SIGKILL"
    if lock.is_held(run_dir):
        message = (f"run {name}: its supervisor is gone and its orphaned process(es) {listed} are still running "
                   f"after {seconds:.0f} s ({what}); try again with --force")
    else:
        message = (f"run {name}: its supervisor was gone; stopped its orphaned process(es) {listed} after "
                   f"{seconds:.1f} s ({what}); resume it with: yolotui resume {shlex.quote(str(run_dir))}")
    return StopResult(str(run_dir), name, was_running=True, state=state, term_sent=not force,
                      kill_sent=kill_sent, seconds=seconds, pgid=groups[0] if groups else None, message=message)


def _group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _withdraw_request(run_dir: Path) -> None:
    """Remove our stop.request again when no start-up took it up (a stop of an ended run changes nothing)."""
    request = read_stop_request(Path(run_dir) / STOP_REQUEST)
    if request is not None and request.by.endswith(f"(pid {os.getpid()})"):
        try:
            (Path(run_dir) / STOP_REQUEST).unlink()
        except FileNotFoundError:
            pass


def _wait_for_exit(run_dir: Path, supervisor_pid: int | None, deadline: float) -> None:
    """Wait, until `deadline`, for the supervisor that recorded the run's end to let go of the run's lock: it
    still makes the mirror's last copy and sends the last notification, and `stop && resume` needs the lock."""
    while supervisor_pid and time.monotonic() < deadline and lock.is_held(run_dir):
        if lock.owner_pid(run_dir) not in (None, supervisor_pid):
            return  # another owner already (a resume that began meanwhile)
        time.sleep(POLL_S)


def _wait_for_startup(run_dir: Path, seconds: float = STARTUP_WAIT_S, status: RunStatus | None = None) -> bool:
    """True when a new owner takes the run's lock within `seconds` (a launch or resume was starting).

    The supervisor that recorded the run's end may hold the lock a moment longer while it exits: that is no
    start-up.
    """
    ended_by = status.supervisor_pid if status is not None else None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if lock.is_held(run_dir) and (ended_by is None or lock.owner_pid(run_dir) != ended_by):
            return True
        time.sleep(0.02)
    return False


def stop(run_dir: Path, force: bool = False, grace_s: float = 30.0, *, wait: bool = True,
         timeout_s: float | None = None) -> StopResult:
    """Stop a run: SIGTERM to its trainer's process group, SIGKILL after `grace_s` (at once with `force`).

    With `wait`, returns once the run has ended and its supervisor has let go of the run (the mirror's last copy
    and the last notification made), or once `timeout_s` (default grace + 30 s) has passed, and reports the
    signals sent; otherwise returns right after the request is written.
    """
    run_dir = Path(run_dir)
    check_grace(grace_s)
    status = read_status(run_dir)
    name = _name(run_dir, status)
    state = effective_state(run_dir, status)
    started = time.monotonic()
    if status is not None and status.slurm and status.slurm.get("job_id"):
        if state not in LIVE_STATES:
            return StopResult(str(run_dir), name, was_running=False, state=state,
                              message=f"run {name} is not running ({state}); nothing to stop")
        return _stop_slurm_job(run_dir, status, force, grace_s, wait, timeout_s)
    if state not in LIVE_STATES:
        # A launch or resume may be starting right now: the request is honoured by a start-up
        # that began before it, and we wait a moment for that start-up to take the lock.
        request_stop(run_dir, force, grace_s)
        if not _wait_for_startup(run_dir, STARTUP_WAIT_S if wait else 0.0, status):
            _withdraw_request(run_dir)
            return StopResult(str(run_dir), name, was_running=False, state=state,
                              message=f"run {name} is not running ({state}); nothing to stop")
        status = read_status(run_dir)
    else:
        request_stop(run_dir, force, grace_s)
    timeout = timeout_s if timeout_s is not None else grace_s + 30.0
    orphans = orphaned_processes(run_dir, status)
    if orphans:
        return stop_orphans(run_dir, orphans, force, grace_s, timeout)
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
        if status is not None and status.supervisor_pid and not procs.is_alive(status.supervisor_pid):
            orphans = orphaned_processes(run_dir, status)  # the supervisor died during the stop
            if orphans:
                return stop_orphans(run_dir, orphans, force, grace_s, max(1.0, deadline - now))
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
    if state not in LIVE_STATES:
        status = read_status(run_dir) or status  # the supervisor's final word, with its stop record
        _wait_for_exit(run_dir, status.supervisor_pid if status is not None else None, deadline)
    record = (status.stop if status is not None else None) or {}
    term_sent = bool(record.get("term_sent")) or (direct_term is not None and not force)
    kill_sent = bool(record.get("kill_sent")) or direct_kill
    return _stop_result(run_dir, name, state, pgid, seconds, term_sent, kill_sent, grace_s)


def _stop_result(run_dir: Path, name: str, state: str, pgid: int | None, seconds: float, term_sent: bool,
                 kill_sent: bool, grace_s: float) -> StopResult:
    """The result of a stop that waited: how the run ended and the signals it took, in words."""
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
    from yolotui.placement import slurm
    from yolotui.runs import slurm_state

    name = _name(run_dir, status)
    job = str(status.slurm["job_id"])
    started = time.monotonic()
    info = slurm_state.job_info(job, fresh=True)
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
        from yolotui.placement import slurm

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
