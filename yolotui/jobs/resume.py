"""Resume and extend: one pipeline for every backend.

resolve the run -> refuse a foreign-owned folder or a live SLURM job -> the backend refuses options that do not
apply -> claim the run's lock (of two resumes at once exactly one gets past here; the other is told who holds
it) -> the backend's plan (verdict, changed options, writes: yolotui.backends.base.ResumePlan) -> the trust
check of what the plan runs as the folder holds it (yolotui.runs.runconfig's seal: shown, and confirmed on a terminal or
by --trust) -> the plan's writes -> launch, handing the lock to the supervisor. Overrides travel one way (the
plan), and the run keeps its indexed name (runs.index.name_for). With no target, the newest interrupted run is
resumed. Torch-free.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yolotui.errors import UserError
from yolotui.jobs.launch import StartedRun, started
from yolotui.jobs.runextras import RunExtras

RESUME_CHANGEABLE = ("epochs", "batch_size", "device", "workers")


@dataclass
class ResumeRequest:
    """Resume (or extend) a run. `target`: a run folder or name, or its weights/last.pt; None picks the newest
    interrupted run. None for epochs/batch_size/device/workers keeps the saved value. `layout`: process-layout
    flags that replace the saved ones. `from_ckpt`: a checkpoint of the run (best.pt, epochN.pt) to restore
    over a damaged last.pt first. `slurm`: SlurmOptions to resume as a SLURM job; None resubmits a run that
    ran as a SLURM job with its recorded options (and runs any other here). A folder that another user owns
    (or whose run.yaml, opt.yaml ... they own) is refused unless `force`: a resume runs what its files say.
    The StartedRun returned names the command the supervisor runs (and a hook command run.yaml adds)."""

    target: str | None = None
    epochs: int | None = None
    batch_size: int | None = None
    device: str | None = None
    workers: int | None = None
    layout: dict[str, Any] = field(default_factory=dict)
    from_ckpt: str | None = None
    extras: RunExtras = field(default_factory=RunExtras)  # given again: replace the run's; else kept
    slurm: Any | None = None
    force: bool = False  # resume a folder another user owns (runs.ownership) all the same
    trust: bool = False  # run a command/env/logging config this user's yolotui did not write (the seal in runs.runconfig)
    confirm: Callable[[str], bool] | None = None  # asks the user about what `trust` would allow (a terminal)


def refuse_unchangeable(given: dict[str, Any], hint: str) -> None:
    """UserError naming the given options a resumed run may not change (`hint` ends the message)."""
    extra = sorted(k for k in given if k not in RESUME_CHANGEABLE)
    if extra:
        flags = ", ".join("--" + k.replace("_", "-") for k in extra)
        raise UserError(f"{flags} {hint}")


def run_dir_for(target: str | None) -> Path:
    """The run folder a RUN|PATH argument names; None picks the newest interrupted or stopped run."""
    if target is None:
        return newest_resumable()
    path = Path(target).expanduser()
    if path.is_file():
        if path.parent.name != "weights":
            raise UserError(f"{path}: resume continues a run from its weights/last.pt; to start a new run from "
                            "this checkpoint use `yolotui finetune --from` or `yolotui train --weights`")
        if path.name != "last.pt":
            raise UserError(f"{path}: resume continues from weights/last.pt; to start from {path.name} use "
                            "`yolotui finetune --from` or `yolotui train --weights`")
        return path.parent.parent.resolve()
    if path.is_dir() and (path / "opt.yaml").exists():
        return path.resolve()
    from yolotui.runs.resolve import resolve_run

    return Path(resolve_run(target))


def newest_resumable() -> Path:
    """The most recently updated indexed run that ended unfinished and has a last.pt."""
    from yolotui.runs import index, layout
    from yolotui.runs.atomic import read_json
    from yolotui.runs.status import effective_state, read_status

    best: tuple[float, Path] | None = None
    for entry in index.entries():
        run_dir = Path(entry.path)
        last = run_dir / layout.WEIGHTS_DIR / layout.LAST_PT
        manifest = read_json(layout.manifest_path(last)) or {}
        if not last.exists() or manifest.get("epoch", 0) >= manifest.get("epochs", 1):
            continue
        if effective_state(run_dir) not in (layout.INTERRUPTED, layout.STOPPED, layout.FAILED):
            continue
        status = read_status(run_dir)
        stamp = (status.updated if status and status.updated else 0.0) or last.stat().st_mtime
        if best is None or stamp > best[0]:
            best = (stamp, run_dir)
    if best is None:
        raise UserError("no interrupted run to resume: name one (see `yolotui ls`)")
    return best[1]


def resume(request: ResumeRequest) -> StartedRun:
    """Check the run can resume (or extend), then relaunch its trainer with the changed options."""
    from yolotui.backends import get_backend
    from yolotui.backends.base import ResumeOptions
    from yolotui.placement.launcher import refuse_live_slurm_job
    from yolotui.placement.ownership import refuse_foreign
    from yolotui.runs import lock
    from yolotui.runs.runconfig import read_backend

    run_dir = run_dir_for(request.target)
    refuse_foreign(run_dir, request.force)  # before anything in the folder is read for the decision or changed
    refuse_live_slurm_job(run_dir)  # a SLURM run's liveness is its job; before anything in the folder changes
    backend = get_backend(read_backend(run_dir))
    options = ResumeOptions(epochs=request.epochs, batch_size=request.batch_size, device=request.device,
                            workers=request.workers, from_ckpt=request.from_ckpt, layout=dict(request.layout or {}),
                            slurm=request.slurm)
    backend.check_resume_options(run_dir, options)
    if _never_started_queued(run_dir):
        return _requeue(run_dir, request)  # queued again as it was (its launch takes the lock)
    run_extra = request.extras.entries()  # a bad --log-config is refused before the lock is taken
    # The run's lock first, before anything is read for the decision or written: of two
    # simultaneous resumes exactly one gets here; the other exits 1 naming the winner.
    lock_fd = lock.claim(run_dir, "yolotui resume")
    try:
        plan = backend.prepare_resume(run_dir, options)
        _check_trust(run_dir, plan.stored if plan.stored is not None else backend.resume_trusts, request)
        notes = list(plan.notes)
        for write in plan.writes:
            notes += write() or []
    except BaseException:
        lock.release(lock_fd)
        raise
    if plan.spec is None:
        warnings = _launch_training(run_dir, request, plan, backend.name, run_extra, lock_fd)
    else:
        warnings = []
        _relaunch(run_dir, plan, backend.name, run_extra, lock_fd)
    return started(run_dir, plan.verb, warnings, notes)


def _check_trust(run_dir: Path, fields: tuple[str, ...], request: ResumeRequest) -> None:
    """UserError unless what the plan runs as the folder holds it is sealed by this user, or the user trusts it
    (--trust, or a `y` to request.confirm)."""
    from yolotui.runs.runconfig import describe_untrusted, read_run_config, untrusted_fields

    if request.trust or not fields or not (run_dir / "run.yaml").exists():
        return
    found = untrusted_fields(read_run_config(run_dir), fields)
    if not found:
        return
    if request.confirm is not None and request.confirm(describe_untrusted(run_dir, found)):
        return
    names = ", ".join(found)
    raise UserError(f"{run_dir}/run.yaml: {names} not written by yolotui on this machine (restored, copied or "
                    f"edited); check them and resume with --trust to run them")


def untrusted(run_dir: Path) -> str | None:
    """What a resume of `run_dir` would ask the user to trust (the TUI's resume wizard shows it), or None."""
    from yolotui.backends import get_backend
    from yolotui.runs.runconfig import describe_untrusted, read_backend, read_run_config, untrusted_fields

    run_dir = Path(run_dir)
    if not (run_dir / "run.yaml").exists():
        return None
    try:
        fields = get_backend(read_backend(run_dir)).resume_trusts
        found = untrusted_fields(read_run_config(run_dir), fields)
    except UserError:
        return None
    return describe_untrusted(run_dir, found) if found else None


def _launch_training(run_dir: Path, request: ResumeRequest, plan: Any, backend: str, run_extra: dict[str, Any],
                     lock_fd: int) -> list[str]:
    """A plan without a command: the job layer's training launch of the plan's options (yolotui's engine)."""
    from yolotui.jobs.launch import start_training
    from yolotui.placement.distributed import saved_layout

    try:
        saved = saved_layout(run_dir)  # the layout of the last launch; flags given now replace its entries
        if plan.overrides.get("device") is not None:
            saved.pop("nproc_per_node", None)  # a new device list sets the process count anew
        from yolotui.placement.slurm import recorded_options

        slurm = request.slurm if request.slurm is not None else recorded_options(run_dir)
    except BaseException:
        from yolotui.runs import lock

        lock.release(lock_fd)
        raise
    return start_training(run_dir, plan.options or {}, plan.overrides, dist_flags={**saved, **(request.layout or {})},
                          backend=backend, slurm=slurm, run_extra=run_extra, lock_fd=lock_fd)


def _relaunch(run_dir: Path, plan: Any, backend: str, run_extra: dict[str, Any], lock_fd: int) -> None:
    """Launch the plan's command under the supervisor with the run's restart settings and run.yaml entries."""
    from yolotui.jobs.runextras import carried_over
    from yolotui.placement.launcher import launch
    from yolotui.runs.index import name_for
    from yolotui.runs.runconfig import RESERVED_KEYS, read_run_config, restart_settings

    try:
        config = read_run_config(run_dir)
        max_attempts, backoff_s, _ = restart_settings(config)
    except BaseException:
        from yolotui.runs import lock

        lock.release(lock_fd)
        raise
    spec = plan.spec
    extra = {k: v for k, v in config.items() if k not in RESERVED_KEYS and k not in ("logout", "trust")}
    extra.update(carried_over(run_dir, run_extra) if run_extra else {})
    extra.update(spec.extra)
    restart = {k: v for k, v in (config.get("restart") or {}).items() if k not in ("max_attempts", "backoff_s")}
    launch(run_dir, spec.command, name=plan.name or name_for(run_dir), backend=backend, device=plan.device,
           max_attempts=max_attempts, env=spec.env, extra=extra, backoff_s=backoff_s, cwd=spec.cwd, restart=restart,
           lock_fd=lock_fd)


def _never_started_queued(run_dir: Path) -> bool:
    """True for a queued run (run.yaml `queue`) whose first attempt never started (e.g. a reboot while queued)."""
    from yolotui.runs.runconfig import run_yaml_field
    from yolotui.runs.status import read_status

    status = read_status(run_dir)
    return bool(run_yaml_field(run_dir, "queue")) and status is not None and not status.attempts


def _requeue(run_dir: Path, request: ResumeRequest) -> StartedRun:
    """Queue a never-started run again, waiting for what it waited for (runs.service.relaunch)."""
    from yolotui.jobs.queue import describe_spec
    from yolotui.placement.service import relaunch
    from yolotui.runs.runconfig import run_yaml_field

    changed = [name for name in ("epochs", "batch_size", "device", "workers", "from_ckpt")
               if getattr(request, name) is not None]
    if changed or request.layout:
        raise UserError(f"run {run_dir.name} never started (it was queued): it is queued again as it was, so "
                        f"--{(changed or ['layout'])[0].replace('_', '-')} cannot be given; start a new run to "
                        "change its options")
    _check_trust(run_dir, ("command", "env", "logging"), request)  # it runs run.yaml as it stands
    relaunch(run_dir, trusted=True)
    return started(run_dir, "queued", [], [describe_spec(run_yaml_field(run_dir, "queue"))])
