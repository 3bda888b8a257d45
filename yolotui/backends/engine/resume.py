"""Resume and extend a run of yolotui's engine: the plan yolotui.jobs.resume applies with the run's lock held.

Only epochs, batch_size (accumulation re-derived, nominal batch 64 kept), device and workers may change; they
are written to opt.yaml and passed to the trainer as flags. An `epochs` above the planned total extends the run
(also a finished one): the LR schedule is re-planned as if that many epochs had been planned from the start.
`from_ckpt` (`resume --from CKPT`) first makes another checkpoint of the run (best.pt, epochN.pt) its last.pt
(restore_last): the damaged last.pt (and its manifest) are kept beside it as `last.pt.damaged-<time>`; the
chosen checkpoint is copied over `last.pt` atomically with its manifest. Torch-free: checked with yolotui.health.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

from yolotui.backends.base import ResumeOptions, ResumePlan
from yolotui.errors import UserError
from yolotui.runs import layout
from yolotui.runs.atomic import atomic_open, fsync_dir


def _manifest_int(manifest: dict[str, Any], key: str, last: Path) -> int:
    value = manifest.get(key, 0)
    if not isinstance(value, int) or isinstance(value, bool):
        raise UserError(f"unreadable: {last.name}.json: {key}: expected a whole number; run yolotui doctor")
    return value


def _check_values(run_dir: Path, options: ResumeOptions, done: int, planned: int) -> None:
    """UserError for a changed option out of range, or an --epochs that neither resumes nor extends."""
    epochs = options.epochs
    if options.batch_size is not None and options.batch_size < 1:
        raise UserError(f"--batch-size {options.batch_size}: must be at least 1")
    if options.workers is not None and options.workers < 0:
        raise UserError(f"--workers {options.workers}: cannot be negative")
    if epochs is not None:
        if epochs < 1:
            raise UserError(f"--epochs {epochs}: must be at least 1")
        if epochs <= done and done >= planned:
            raise UserError(f"run {run_dir.name} has finished {done} epochs: give --epochs above {done} to extend it")
        if epochs < done:
            raise UserError(f"--epochs {epochs}: the run has already done {done} epochs; give at least {done + 1}")
    elif done >= planned:
        raise UserError(f"run {run_dir.name} finished all {planned} epochs: extend it with --epochs N (N > {done})")


def check_resume_checkpoint(last: Path, total_epochs: int | None = None) -> None:
    """UserError unless the health verdict of `last` allows a resume (resumable, or finished for an extension)."""
    import shlex

    from yolotui.health.verdict import FINISHED, RESUMABLE, diagnose_checkpoint

    verdict = diagnose_checkpoint(Path(last), total_epochs, find_fallback=True)
    if verdict.verdict in (RESUMABLE, FINISHED):
        return
    reason = verdict.reasons[0] if verdict.reasons else verdict.verdict
    fallback = f"; resume from {Path(verdict.fallback).name} with --from {shlex.quote(Path(verdict.fallback).name)}" \
        if verdict.fallback else ""
    raise UserError(f"{last}: {verdict.verdict}: {reason}{fallback} (see `yolotui doctor`)")


def prepare_resume(run_dir: Path, options: ResumeOptions) -> ResumePlan:
    """Check the run can resume (or extend) and plan its option files; `from_ckpt` is restored over last.pt
    here (the caller holds the run's lock). The plan has no command: the job layer's training launch runs it."""
    from yolotui import formatting
    from yolotui.config import load_hyp, load_yaml, opt_yaml_dict, save_yaml
    from yolotui.devices import device_string, parse_device
    from yolotui.runs.atomic import read_json
    from yolotui.runs.manifest import reconcile_run

    run_dir = Path(run_dir)
    reconcile_run(run_dir)  # a save cut short by a kill is settled before last.pt is judged
    if options.from_ckpt:
        restore_last(run_dir, options.from_ckpt)
    last = run_dir / layout.WEIGHTS_DIR / layout.LAST_PT
    if not last.exists():
        raise UserError(f"{run_dir}: no weights/last.pt to resume from; start it again with yolotui train")
    manifest = read_json(layout.manifest_path(last))
    if not isinstance(manifest, dict):
        raise UserError(f"{last}: its manifest {last.name}.json is missing or unreadable; run yolotui doctor")
    done, planned = _manifest_int(manifest, "epoch", last), _manifest_int(manifest, "epochs", last)
    _check_values(run_dir, options, done, planned)
    device = device_string(parse_device(options.device)) if options.device is not None else None
    check_resume_checkpoint(last, options.epochs)  # last.pt's verdict must allow the resume
    opt: dict[str, Any] = load_yaml(run_dir / layout.OPT_YAML, "opt.yaml")
    hyp = load_hyp(run_dir / layout.HYP_YAML)
    overrides = {"epochs": options.epochs, "batch_size": options.batch_size, "device": device,
                 "workers": options.workers}
    opt.update({k: v for k, v in overrides.items() if v is not None})

    def write_options() -> None:
        save_yaml(run_dir / layout.OPT_YAML, opt_yaml_dict({**opt, "save_dir": str(run_dir)}))
        save_yaml(run_dir / layout.HYP_YAML, hyp)

    epochs = options.epochs
    verb = "extending" if epochs is not None and epochs > planned else "resumed"
    note = f"{verb} after {formatting.epochs_done(done, epochs or planned, manifest.get('step', 0))}"
    return ResumePlan(verb=verb, notes=[note], writes=[write_options], options=opt, overrides=overrides)


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
