"""Resume and extend an official run: the plan yolotui.jobs.resume applies with the run's lock held.

The official `--resume RUN/weights/last.pt` (added by the supervisor when that checkpoint is resumable:
`resume_first`) reads its options from opt.yaml, so changed epochs, batch, device or workers are written there
(the first version kept as opt.yaml.orig). A finished, unstripped run extends to `epochs`; a stripped one
(epoch -1) cannot: fine-tune it instead. With no usable last.pt the original command starts the run over.
"""

from __future__ import annotations

from pathlib import Path

from yolotui.backends.base import LaunchSpec, ResumeOptions, ResumePlan
from yolotui.backends.official.backend import OPT_ORIG, edit_opt_yaml, read_opt, resume_settings, save_dir
from yolotui.errors import UserError
from yolotui.runs import layout


def _verdict_plan(run_dir: Path, epochs: int | None, plan: ResumePlan) -> None:
    """The verdict of last.pt: the verb and notes (UserError when it cannot resume or extend)."""
    from yolotui.health.verdict import FINISHED, RESUMABLE, diagnose_checkpoint

    opt = read_opt(run_dir)
    planned = int(opt.get("epochs") or 0) or None
    last = layout.weights_dir(save_dir(run_dir)) / layout.LAST_PT
    verdict = diagnose_checkpoint(last, total_epochs=planned, find_fallback=False)
    if verdict.verdict == FINISHED:
        if verdict.info is not None and verdict.info.epoch == -1:
            raise UserError(f"{last} is stripped (the official strip_optimizer ran: epoch -1, no optimizer), so the "
                            f"official trainer cannot extend it; fine-tune it instead: yolotui finetune --from "
                            f"{run_dir} --epochs N (or the fine-tune wizard)")
        if epochs is None or verdict.epoch is None or epochs <= verdict.epoch:
            raise UserError(f"run {run_dir.name} finished all {verdict.epoch} epochs: extend it with --epochs N "
                            f"(N > {verdict.epoch})")
        plan.verb = "extending"
        plan.notes.append(f"extending from epoch {verdict.epoch} to {epochs}: the official trainer re-plans its lr "
                          f"schedule for {epochs} epochs and continues at epoch {verdict.epoch}")
    elif verdict.verdict == RESUMABLE:
        if epochs is not None and verdict.epoch is not None and epochs <= verdict.epoch:
            raise UserError(f"--epochs {epochs}: the run has already done {verdict.epoch} epochs; give at least "
                            f"{verdict.epoch + 1}")
        plan.notes.append(f"resuming from epoch {verdict.epoch} of {epochs or planned} with the official --resume "
                          f"{last}")
    else:
        why = "; ".join(verdict.reasons) or verdict.verdict
        plan.notes.append(f"no usable last.pt ({verdict.verdict}: {why}): the original command starts the run over")
        plan.verb = "started"


def prepare_resume(run_dir: Path, options: ResumeOptions) -> ResumePlan:
    """The official resume of `run_dir` (see the module docstring); nothing is written until it is applied."""
    from yolotui.runs.runconfig import read_run_config

    run_dir = Path(run_dir)
    for flag, value, least in (("--epochs", options.epochs, 1), ("--batch-size", options.batch_size, 1),
                               ("--workers", options.workers, 0)):
        if value is not None and value < least:
            raise UserError(f"{flag} {value}: must be at least {least}")
    config = read_run_config(run_dir)
    plan = ResumePlan(device=config.get("device"))
    _verdict_plan(run_dir, options.epochs, plan)
    changes = {k: v for k, v in (("epochs", options.epochs), ("batch_size", options.batch_size),
                                  ("device", options.device), ("workers", options.workers)) if v is not None}
    if changes:
        def write_opt() -> list[str]:
            settings = edit_opt_yaml(run_dir, changes)
            return ["opt.yaml: " + ", ".join(f"{k} {a} -> {b}" for k, (a, b) in settings.items())
                    + f" (the official --resume reads it; the first version is kept as {OPT_ORIG})"] if settings else []

        plan.writes.append(write_opt)
    plan.spec = LaunchSpec(command=[str(a) for a in config["command"]],
                           env={str(k): str(v) for k, v in (config.get("env") or {}).items()},
                           cwd=Path(config["cwd"]) if config.get("cwd") else None,
                           extra={**resume_settings(save_dir(run_dir)), "resume_first": True})
    return plan
