"""Starting a run: write run.yaml and a queued status.json, index the run, start its detached supervisor.

The supervisor (`python -m yolotui.supervisor.process RUN`) is started in a new session (setsid) with stdin
from /dev/null and stdout/stderr to RUN/supervisor.log, so a hangup of the terminal (an SSH drop) never
reaches it. PYTHONPATH is prefixed with the folder holding this yolotui package, so the supervisor runs the
same code as the launcher, also from a checkout that is not installed. `launch` returns within about two
seconds, once the supervisor holds RUN/.lock (or has failed to start, which raises UserError).

Where systemd-logind kills a user's processes at logout, a new session is not enough: `session_guard` detects
that case and wraps the supervisor's argv (`systemd-run --user --scope ...`), or records a warning with the
`loginctl enable-linger` command; run.yaml's `logout` says which applied.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yolotui
from yolotui import procs
from yolotui.errors import UserError
from yolotui.runs import index, lock
from yolotui.runs.layout import QUEUED, STOP_REQUEST, SUPERVISOR_LOG
from yolotui.runs.lock import LOCK_FD_FLAG
from yolotui.runs.runconfig import (
    DEFAULT_BACKOFF_MAX_S,
    DEFAULT_BACKOFF_S,
    RESERVED_KEYS,
    run_yaml_field,
    write_run_config,
)
from yolotui.runs.status import RunStatus, attempt_seconds, read_status, write_status
from yolotui.runs.store import check_writable, validate_name

if TYPE_CHECKING:
    from yolotui.placement.slurm import SlurmOptions

START_TIMEOUT_S = 2.0


def package_root() -> Path:
    """The folder that contains the `yolotui` package (put first on the supervisor's PYTHONPATH)."""
    return Path(yolotui.__file__).resolve().parent.parent


def supervisor_argv(run_dir: Path) -> list[str]:
    """The command that supervises `run_dir`."""
    return [sys.executable, "-m", "yolotui.supervisor.process", str(run_dir)]


def session_guard(argv: list[str], run_dir: Path, name: str | None = None) -> tuple[list[str], dict[str, Any]]:
    """Make the supervisor survive logout where systemd-logind kills user processes (yolotui/placement/logout.py).

    Returns the argv to start (prefixed with `systemd-run --user --scope` where needed and usable) and the
    record kept in run.yaml under `logout`: applied, note, warning, and the logind facts.
    """
    from yolotui.placement.logout import guard_supervisor

    return guard_supervisor(argv, name or Path(run_dir).name)


def check_command(command: Sequence[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> list[str]:
    """The command as a list of strings; UserError when it is empty or its program cannot be found."""
    cwd = Path.cwd() if cwd is None else Path(cwd)
    env = env or {}
    argv = [str(part) for part in command]
    if not argv or not argv[0]:
        raise UserError("no command given: put it after '--', e.g. yolotui exec -- python train.py")
    if any("\0" in part for part in argv):
        raise UserError("the command contains a NUL character; remove it")
    program = argv[0]
    if os.sep in program:
        path = Path(program) if os.path.isabs(program) else cwd / program
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise UserError(f"command {program!r} is not an executable file; check the path and its permissions")
    elif shutil.which(program, path=env.get("PATH", os.environ.get("PATH"))) is None:
        raise UserError(f"command {program!r} not found on PATH; give its full path or install it")
    return argv


def _reap_in_background(proc: subprocess.Popen) -> None:
    """Collect the supervisor's exit status when it ends, so a long-lived launcher (the TUI) leaves no zombie."""
    threading.Thread(target=proc.wait, name=f"reap-supervisor-{proc.pid}", daemon=True).start()


def _last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


def _clear_requests(run_dir: Path, keep_stop: bool = False) -> None:
    """Remove stop/save requests left from an earlier life of this folder (`keep_stop`: the stop request was
    already judged by `drop_stale_stop_request`)."""
    from yolotui.placement.slurm import SAVE_REQUEST

    for leftover in ((SAVE_REQUEST,) if keep_stop else (STOP_REQUEST, SAVE_REQUEST)):
        try:
            (run_dir / leftover).unlink()
        except FileNotFoundError:
            pass


def refuse_live_slurm_job(run_dir: Path) -> None:
    """UserError when the folder's run is a SLURM job that is still queued, or running with its supervisor
    at work (a job whose supervisor has recorded a final state may still be completing: that is no refusal)."""
    from yolotui.runs.layout import LIVE_STATES

    status = read_status(run_dir)
    job = (status.slurm or {}).get("job_id") if status is not None and status.slurm else None
    if not job:
        return
    from yolotui.runs.slurm_state import job_info

    info = job_info(str(job), fresh=True)
    if info is not None and (info.pending or (info.active and status.state in LIVE_STATES)):
        raise UserError(f"run {run_dir} is SLURM job {job}, still {info.state.lower()}: stop it first "
                        f"(yolotui stop {run_dir.name}) or use another name")


def submit_to_slurm(run_dir: Path, config: dict[str, Any], options: SlurmOptions) -> RunStatus:
    """Write run.yaml, a queued status.json and RUN/slurm.sh, then `sbatch` it (yolotui/placement/slurm.py).

    Checks at submit time whether the run folder is on storage the compute nodes see (run.yaml's
    `slurm.storage`, and `storage_warning` when not; jobs.results.started reports it). run.yaml's `slurm`
    records the options, the job ids (one more per resubmission) and the submit command.
    """
    from yolotui.placement import slurm

    note, is_warning = slurm.storage_note(run_dir)
    config["logout"] = {"applied": "slurm", "note": "runs as a SLURM job: logging out does not end it",
                        "warning": None}
    earlier = run_yaml_field(run_dir, "slurm")
    previous: dict[str, Any] = earlier if isinstance(earlier, dict) else {}  # a resubmission keeps the job ids
    config["slurm"] = {"options": options.to_record(), "job_ids": list(previous.get("job_ids") or []),
                       "submit_command": None, "script": slurm.SCRIPT, "storage": note,
                       "storage_warning": bool(is_warning)}
    write_run_config(run_dir, config)
    _clear_requests(run_dir)
    argv = [str(a) for a in config["command"]]
    status = RunStatus(name=config["name"], run_dir=str(run_dir), state=QUEUED,
                       max_attempts=int(config["restart"]["max_attempts"]), command=argv,
                       backend=config["backend"], device=config.get("device"), slurm={"job_id": None})
    write_status(run_dir, status)
    slurm.write_script(run_dir, options, config["name"], pythonpath=str(package_root()))
    from yolotui.runs.atomic import open_append

    os.close(open_append(run_dir / SUPERVISOR_LOG, private=True))  # 0600 before the job's `>>` creates it
    job_id, submit_argv = slurm.submit(run_dir)
    config["slurm"]["job_ids"].append(job_id)
    config["slurm"]["submit_command"] = submit_argv
    write_run_config(run_dir, config)
    status.slurm = {"job_id": job_id, "restarts": 0, "submitted": time.time()}
    status.message = f"submitted as SLURM job {job_id}"
    write_status(run_dir, status)
    index.add(run_dir, config["name"])
    return status


def launch(
    run_dir: Path,
    command: Sequence[str],
    *,
    name: str,
    backend: str = "exec",
    device: str | None = None,
    max_attempts: int = 1,
    env: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
    backoff_s: float = DEFAULT_BACKOFF_S,
    cwd: Path | None = None,
    restart: dict[str, Any] | None = None,
    queue: dict[str, Any] | None = None,
    slurm: SlurmOptions | None = None,
    lock_fd: int | None = None,
    checkpoint_hint: int | None = None,
) -> RunStatus:
    """Start `command` as a supervised, detached run in `run_dir`; returns its status once supervised.

    `env` adds variables to the command's environment; `extra` adds options to run.yaml (e.g. `resume_args`,
    `save_signal`, a backend's resolved options); `cwd` is the command's working folder (default: ours);
    `restart` adds restart settings (e.g. `min_batch`, `collective_timeout_s`, `backoff_max_s`; see remedies).
    `queue` (yolotui.placement.queue.make_spec) makes the supervisor wait in state `queued` before attempt 1.
    `slurm` (yolotui.placement.slurm.SlurmOptions) submits the supervisor as a SLURM job instead of starting it
    here (see `submit_to_slurm`); SLURM does the queueing then, so it does not go with `queue`.
    Raises UserError for an unwritable folder, a bad name, a missing program, too little disk space or a run
    that is still live, always before anything detaches.

    `lock_fd` is the run's lock, already claimed by the caller (`lock.claim`) before it wrote opt.yaml; without
    it the lock is claimed here, before run.yaml is written (RunBusy naming the owner when another process has
    it). Either way launch() owns the descriptor from then on: it hands it to the supervisor (which hands it
    to the trainer), so the run stays owned from the first write to the trainer's last breath, and closes its
    own copy. `checkpoint_hint` is the expected size of one checkpoint (e.g. the initial weights) for the
    free-space check.
    """
    try:
        return _launch(run_dir, command, name=name, backend=backend, device=device, max_attempts=max_attempts,
                       env=env, extra=extra, backoff_s=backoff_s, cwd=cwd, restart=restart, lock_fd=lock_fd,
                       checkpoint_hint=checkpoint_hint, queue=queue, slurm=slurm)
    finally:
        lock.release(lock_fd)


def _launch(run_dir: Path, command: Sequence[str], *, name: str, backend: str, device: str | None,
            max_attempts: int, env: dict[str, str] | None, extra: dict[str, Any] | None, backoff_s: float,
            cwd: Path | None, restart: dict[str, Any] | None, lock_fd: int | None,
            checkpoint_hint: int | None, queue: dict[str, Any] | None = None,
            slurm: SlurmOptions | None = None) -> RunStatus:
    """launch() with the caller's lock descriptor (closed by launch(), whatever happens here)."""
    run_dir = Path(run_dir).resolve()
    validate_name(name)
    index.check_home()
    if slurm is not None:
        from yolotui.placement.slurm import require_sbatch

        if queue:
            raise UserError("--slurm runs the job through SLURM's own queue: leave out yolotui's queue options "
                            "(--after, --when-free) or --slurm")
        require_sbatch()
    check_writable(run_dir.parent)
    if run_dir.exists():
        check_writable(run_dir)
    if max_attempts < 1:
        raise UserError(f"max attempts must be at least 1 (got {max_attempts})")
    if not math.isfinite(float(backoff_s)) or backoff_s < 0:
        raise UserError(f"--restart-backoff {backoff_s}: give a finite number of seconds, 0 or more")
    env = {str(k): str(v) for k, v in (env or {}).items()}
    workdir = Path(cwd).resolve() if cwd is not None else Path.cwd()
    argv = check_command(command, workdir, env)
    extra = dict(extra or {})
    clash = RESERVED_KEYS.intersection(extra)
    if clash:
        raise ValueError(f"extra options may not set {sorted(clash)}: they are launch() arguments")
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create run folder {run_dir}: {exc.strerror}; choose another --project") from exc
    own_fd = None
    if lock_fd is None:
        own_fd = lock_fd = lock.claim(run_dir, f"yolotui launch of {name}")
    try:
        return _start(run_dir, argv, lock_fd, name=name, backend=backend, device=device,
                      max_attempts=max_attempts, env=env, extra=extra, backoff_s=backoff_s, workdir=workdir,
                      restart=restart, checkpoint_hint=checkpoint_hint, queue=queue, slurm=slurm)
    finally:
        lock.release(own_fd)


def _start(run_dir: Path, argv: list[str], lock_fd: int, *, name: str, backend: str, device: str | None,
           max_attempts: int, env: dict[str, str], extra: dict[str, Any], backoff_s: float, workdir: Path,
           restart: dict[str, Any] | None, checkpoint_hint: int | None,
           queue: dict[str, Any] | None = None, slurm: SlurmOptions | None = None) -> RunStatus:
    """Write run.yaml and status.json and start the supervisor, the run's lock held in `lock_fd`."""
    from yolotui.placement import diskspace
    from yolotui.runs.manifest import reconcile_run

    diskspace.check_room(run_dir, checkpoint_hint)
    reconcile_run(run_dir)  # the run is ours now: put last.pt and its manifest back in step before resuming
    launch_started = procs.start_time(os.getpid()) or time.time()
    refuse_live_slurm_job(run_dir)
    if slurm is not None and (slurm.nodes or 1) > 1:
        from yolotui.placement.slurm import multi_node_command

        argv = multi_node_command(argv, (extra.get("distributed") or {}).get("nproc_per_node")
                                  if isinstance(extra.get("distributed"), dict) else None)

    config: dict[str, Any] = {
        "name": name,
        "backend": backend,
        "command": argv,
        "cwd": str(workdir),
        "device": device,
        "env": env,
        "restart": {"max_attempts": int(max_attempts), "backoff_s": float(backoff_s),
                    "backoff_max_s": DEFAULT_BACKOFF_MAX_S, **(restart or {})},
        "created": time.time(),
        **extra,
    }
    if slurm is not None:
        return submit_to_slurm(run_dir, config, slurm)
    if queue:
        config["queue"] = dict(queue)
    start_argv, logout_record = session_guard(supervisor_argv(run_dir), run_dir, name)
    config["logout"] = logout_record  # how the supervisor survives logout, for the launch output and doctor
    write_run_config(run_dir, config)
    drop_stale_stop_request(run_dir, launch_started)
    _clear_requests(run_dir, keep_stop=True)
    status = _queued_status(run_dir, name, argv, backend, device, max_attempts, queue)
    index.add(run_dir, name)
    proc, log_path = _spawn_supervisor(run_dir, start_argv, lock_fd, logout_record)

    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        current = read_status(run_dir)
        if current is not None and current.supervisor_pid and (current.updated or 0) >= launch_started:
            return current
        if proc.poll() is not None:
            detail = _last_line(log_path) or f"exit code {proc.returncode}"
            raise UserError(f"the supervisor of {run_dir} did not start: {detail} (see {log_path})")
        time.sleep(0.02)
    return read_status(run_dir) or status


def _queued_status(run_dir: Path, name: str, argv: list[str], backend: str, device: str | None,
                   max_attempts: int, queue: dict[str, Any] | None) -> RunStatus:
    """Write the status.json a launch starts with: queued and launching, a resume's start and earlier time kept."""
    status = RunStatus(name=name, run_dir=str(run_dir), state=QUEUED, max_attempts=int(max_attempts),
                       command=argv, backend=backend, device=device)
    status.launching = True  # queued, not interrupted, until the supervisor takes the lock (status.state_of)
    previous = read_status(run_dir)
    if previous is not None:  # a resume: keep the first start and the time the earlier attempts ran
        status.started = previous.started
        status.earlier_seconds = (previous.earlier_seconds or 0.0) + (
            attempt_seconds(list(previous.attempts or []), previous.ended or previous.updated) or 0.0)
    if queue:
        from yolotui.placement.queue import describe

        status.queue = {"spec": dict(queue), "reason": describe(queue), "since": time.time()}
        status.message = f"queued: {describe(queue)}"
    write_status(run_dir, status)
    return status


def _spawn_supervisor(run_dir: Path, start_argv: list[str], lock_fd: int, logout_record: dict[str, Any]) \
        -> tuple[subprocess.Popen, Path]:
    """Start the detached supervisor with the run's lock, its output appended to supervisor.log (returned)."""
    from yolotui.runs.atomic import append_bytes, open_append

    child_env = dict(os.environ)
    root = str(package_root())
    child_env["PYTHONPATH"] = root + (os.pathsep + child_env["PYTHONPATH"] if child_env.get("PYTHONPATH") else "")
    log_path = run_dir / SUPERVISOR_LOG
    append_bytes(log_path, f"launcher: logout: {logout_record['note']}\n".encode(), private=True)
    if logout_record.get("warning"):
        append_bytes(log_path, f"launcher: warning: {logout_record['warning']}\n".encode(), private=True)
    log_fd = open_append(log_path, private=True)
    try:
        proc = subprocess.Popen(  # an argv list, never a shell
            [*start_argv, LOCK_FD_FLAG, str(lock_fd)],
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=subprocess.STDOUT,
            cwd=str(run_dir),
            env=child_env,
            close_fds=True,
            pass_fds=(lock_fd,),  # the run's lock: the supervisor owns the run from its first instant
            start_new_session=True,
        )
    finally:
        os.close(log_fd)
    _reap_in_background(proc)
    return proc, log_path


def drop_stale_stop_request(run_dir: Path, launch_started: float) -> None:
    """Remove a stop.request written before this launch began; keep one written since (a stop during start-up).

    A `yolotui stop` that arrives while a launch or resume is starting is honoured by the new supervisor at
    once; an old request left from an earlier life of the folder is not.
    """
    from yolotui.runs.stoprequest import read_stop_request

    path = run_dir / STOP_REQUEST
    request = read_stop_request(path)
    if request is None:
        return
    if request.requested >= launch_started:
        return
    try:
        path.unlink()
    except FileNotFoundError:
        pass
