"""Resume and extend: continue a run from weights/last.pt with its saved options, a few of them changed.

Only epochs, batch_size (accumulation re-derived, nominal batch 64 kept), device and workers may change.
An `epochs` above the planned total extends the run (also a finished one): the LR schedule is re-planned
as if that many epochs had been planned from the start. With no target, the newest interrupted run is
resumed. `from_ckpt` (`resume --from CKPT`) first makes another checkpoint of the run (best.pt, epochN.pt) its
last.pt (restore_last): used when last.pt is damaged or missing and doctor names a fallback. The damaged last.pt (and its manifest)
are kept beside it as `last.pt.damaged-<time>` for inspection; the chosen checkpoint is copied over
`last.pt` atomically (temp file, fsync, replace) with its manifest, so the trainer resumes from it exactly
as from any last.pt. Torch-free: the choice is checked with yolotui.health.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yolotui.errors import UserError
from yolotui.jobs.launch import StartedRun, started
from yolotui.jobs.runextras import RunExtras
from yolotui.runs import layout
from yolotui.runs.atomic import atomic_open, fsync_dir

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
    from yolotui.jobs.launch import start_training
    from yolotui.placement.distributed import saved_layout
    from yolotui.runs import lock
    from yolotui.runs.runconfig import read_backend

    epochs, batch_size, device, workers = request.epochs, request.batch_size, request.device, request.workers
    run_extra = request.extras.entries()
    run_dir = run_dir_for(request.target)
    from yolotui.placement.ownership import refuse_foreign

    refuse_foreign(run_dir, request.force)  # before anything in the folder is read for the decision or changed
    from yolotui.placement.launcher import refuse_live_slurm_job

    refuse_live_slurm_job(run_dir)  # a SLURM run's liveness is its job; before anything in the folder changes
    if read_backend(run_dir) == "official":  # the official trainer's own --resume semantics (jobs.official)
        if request.from_ckpt or any(request.layout.values() if request.layout else ()):
            raise UserError("an official run resumes from its weights/last.pt with the official --resume; "
                            "--from and the process-layout flags do not apply to it")
        if request.slurm is not None:
            raise UserError("--slurm does not go with an official-backend run yet; resume it here")
        from yolotui.jobs.official import resume_official

        return resume_official(run_dir, epochs, batch_size, device, workers)
    if read_backend(run_dir) == "ultralytics":  # ultralytics' own resume=True from last.pt (jobs.ultralytics)
        if request.from_ckpt or any(request.layout.values() if request.layout else ()) or request.slurm is not None:
            raise UserError("an ultralytics run resumes from its weights/last.pt with ultralytics' resume; --from, "
                            "--slurm and the process-layout flags do not apply to it")
        from yolotui.jobs.ultralytics import resume_ultralytics

        return resume_ultralytics(run_dir, epochs, batch_size, device, workers)
    # The run's lock first, before anything is read for the decision or written: of two
    # simultaneous resumes exactly one gets here; the other exits 1 naming the winner.
    if _never_started_queued(run_dir):
        return _requeue(run_dir, request)  # queued again as it was (its launch takes the lock)
    lock_fd = lock.claim(run_dir, "yolotui resume")
    try:
        opt, overrides, manifest, done, planned = _prepare(run_dir, request, epochs, batch_size, device, workers)
    except BaseException:
        lock.release(lock_fd)
        raise
    saved = saved_layout(run_dir)  # the layout of the last launch; flags given now replace its entries
    if overrides["device"] is not None:
        saved.pop("nproc_per_node", None)  # a new device list sets the process count anew
    try:
        from yolotui.placement.slurm import recorded_options

        slurm = request.slurm if request.slurm is not None else recorded_options(run_dir)
    except BaseException:
        lock.release(lock_fd)
        raise
    warnings = start_training(run_dir, opt, overrides, dist_flags={**saved, **(request.layout or {})},
                              backend=read_backend(run_dir), slurm=slurm, run_extra=run_extra, lock_fd=lock_fd)
    verb = "extending" if epochs is not None and epochs > planned else "resumed"
    from yolotui import formatting

    note = f"{verb} after {formatting.epochs_done(done, epochs or planned, manifest.get('step', 0))}"
    return started(run_dir, verb, warnings, [note])


def _manifest_int(manifest: dict[str, Any], key: str, last: Path) -> int:
    value = manifest.get(key, 0)
    if not isinstance(value, int) or isinstance(value, bool):
        raise UserError(f"unreadable: {last.name}.json: {key}: expected a whole number; run yolotui doctor")
    return value


def _prepare(run_dir: Path, request: ResumeRequest, epochs: int | None, batch_size: int | None,
             device: str | None, workers: int | None) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any],
                                                               int, int]:
    """With the run's lock held: check the run can resume and write its option files.

    Returns (opt, overrides, manifest, epochs done, epochs planned).
    """
    from yolotui.config import load_hyp, load_yaml
    from yolotui.devices import device_string, parse_device
    from yolotui.jobs.launch import write_run_files
    from yolotui.jobs.preflight import check_resume_checkpoint
    from yolotui.runs import layout
    from yolotui.runs.atomic import read_json
    from yolotui.runs.manifest import reconcile_run

    reconcile_run(run_dir)  # a save cut short by a kill is settled before last.pt is judged
    if request.from_ckpt:
        restore_last(run_dir, request.from_ckpt)
    last = run_dir / layout.WEIGHTS_DIR / layout.LAST_PT
    if not last.exists():
        raise UserError(f"{run_dir}: no weights/last.pt to resume from; start it again with yolotui train")
    manifest = read_json(layout.manifest_path(last))
    if not isinstance(manifest, dict):
        raise UserError(f"{last}: its manifest {last.name}.json is missing or unreadable; run yolotui doctor")
    done, planned = _manifest_int(manifest, "epoch", last), _manifest_int(manifest, "epochs", last)
    if batch_size is not None and batch_size < 1:
        raise UserError(f"--batch-size {batch_size}: must be at least 1")
    if workers is not None and workers < 0:
        raise UserError(f"--workers {workers}: cannot be negative")
    if epochs is not None:
        if epochs < 1:
            raise UserError(f"--epochs {epochs}: must be at least 1")
        if epochs <= done and done >= planned:
            raise UserError(f"run {run_dir.name} has finished {done} epochs: give --epochs above {done} to extend it")
        if epochs < done:
            raise UserError(f"--epochs {epochs}: the run has already done {done} epochs; give at least {done + 1}")
    elif done >= planned:
        raise UserError(f"run {run_dir.name} finished all {planned} epochs: extend it with --epochs N (N > {done})")
    if device is not None:
        device = device_string(parse_device(device))
    check_resume_checkpoint(last, epochs)  # last.pt's verdict must allow the resume
    opt: dict[str, Any] = load_yaml(run_dir / layout.OPT_YAML, "opt.yaml")
    overrides = {"epochs": epochs, "batch_size": batch_size, "device": device, "workers": workers}
    for key, value in overrides.items():
        if value is not None:
            opt[key] = value
    write_run_files(run_dir, opt, load_hyp(run_dir / layout.HYP_YAML))
    return opt, overrides, manifest, done, planned


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
    relaunch(run_dir)
    return started(run_dir, "queued", [], [describe_spec(run_yaml_field(run_dir, "queue"))])


def _copy_atomic(source: Path, target: Path) -> None:
    """Copy `source` over `target` through runs.atomic (a fresh temp file, never through a symlink)."""
    with open(source, "rb") as reader, atomic_open(target, "wb") as writer:
        shutil.copyfileobj(reader, writer, 1 << 20)


def restore_last(run_dir: Path, value: str) -> Path:
    """Copy checkpoint `value` (a path, or a file name in RUN/weights) over RUN/weights/last.pt; returns it."""
    from yolotui.health.verdict import FINISHED, RESUMABLE, diagnose_checkpoint

    weights = layout.weights_dir(run_dir)
    source = Path(value).expanduser()
    if not source.is_absolute() and not source.exists():
        source = weights / value
    if not source.is_file():
        raise UserError(f"--from {value}: no such checkpoint in {weights}")
    source = source.resolve()
    if source.parent != weights.resolve():
        raise UserError(f"--from {value}: resume takes a checkpoint of this run ({weights}); to start from "
                        "another run's weights use `yolotui finetune --from`")
    last = weights / layout.LAST_PT
    if source == last.resolve():
        return last
    verdict = diagnose_checkpoint(source, find_fallback=False)
    if verdict.verdict not in (RESUMABLE, FINISHED):
        reason = verdict.reasons[0] if verdict.reasons else verdict.verdict
        raise UserError(f"--from {source.name}: {verdict.verdict} ({reason}); it cannot be resumed from")
    manifest = layout.manifest_path(source)
    if not manifest.is_file():
        raise UserError(f"--from {source.name}: its manifest {manifest.name} is missing; resume needs it")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for old in (last, layout.manifest_path(last)):
        if old.exists():
            os.replace(old, old.with_name(f"{old.name}.damaged-{stamp}"))
    _copy_atomic(source, last)
    _copy_atomic(manifest, layout.manifest_path(last))
    fsync_dir(weights)
    return last
