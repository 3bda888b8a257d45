"""Resume and extend an ultralytics run: the plan yolotui.jobs.resume applies with the run's lock held.

ultralytics resumes from weights/last.pt with its own resume=True (the supervisor adds it: `resume_first`);
an `epochs` above the plan extends the run (the checkpoint's train_args rewritten by the user's interpreter, a
copy kept); without a usable last.pt the original command starts over. A stripped final last.pt with no
unstripped copy is refused with the fine-tune to use instead. Batch, workers and device changes go into the
run's command (`--yolotui-batch` ...), so they hold for every later attempt too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from yolotui.backends.base import LaunchSpec, ResumeOptions, ResumePlan
from yolotui.backends.ultralytics.launch import NAME, resume_settings, save_dir
from yolotui.errors import UserError
from yolotui.runs import layout


def refuse_bad_values(options: ResumeOptions) -> None:
    """UserError for an --epochs, --batch-size or --workers out of range."""
    for flag, value, least in (("--epochs", options.epochs, 1), ("--batch-size", options.batch_size, 1),
                               ("--workers", options.workers, 0)):
        if value is not None and value < least:
            raise UserError(f"{flag} {value}: must be at least {least}")


def _checkpoint_plan(run_dir: Path, python: str, folder: Path, epochs: int | None,
                     plan: ResumePlan) -> None:
    """The verdict of last.pt: the verb, notes and the checkpoint rewrite an extension needs."""
    from yolotui.backends.ultralytics.checkpoint import extend_source, verdict_of
    from yolotui.backends.ultralytics.launch import extend_checkpoint
    from yolotui.health.verdict import FINISHED, RESUMABLE

    weights = folder / layout.WEIGHTS_DIR
    last = weights / layout.LAST_PT
    verdict = verdict_of(last)
    done, planned = verdict.epoch, verdict.total_epochs
    if verdict.verdict == FINISHED:
        if epochs is None or done is None or epochs <= done:
            raise UserError(f"run {run_dir.name} finished all {done} epochs: extend it with --epochs N (N > {done})")
        source = extend_source(weights)
        if source.path is None:
            raise UserError(f"{last}: {source.reason}; fine-tune it instead: yolotui finetune --from {run_dir} "
                            f"--backend ultralytics --data DATA --epochs N (or the fine-tune wizard)")
        chosen = source.path
        plan.writes.append(lambda: extend_checkpoint(python, weights, chosen, epochs))
        plan.verb = "extending"
        plan.notes.append(f"extending from epoch {done} to {epochs} with ultralytics' resume=True: its lr schedule "
                          f"is re-planned for {epochs} epochs and training continues at epoch {done + 1}")
    elif verdict.verdict == RESUMABLE:
        if epochs is not None and done is not None and epochs <= done:
            raise UserError(f"--epochs {epochs}: the run has already done {done} epochs; give at least {done + 1}")
        if epochs is not None and epochs != planned:
            plan.writes.append(lambda: extend_checkpoint(python, weights, last, epochs))
            plan.verb = "extending" if planned is not None and epochs > planned else "resumed"
        plan.notes.append(f"resuming from epoch {done} of {epochs or planned} with ultralytics' resume=True from "
                          f"{last}")
    else:
        if epochs is not None:
            raise UserError(f"--epochs {epochs}: {last} is not resumable ({verdict.verdict}: "
                            f"{'; '.join(verdict.reasons)}); resume without --epochs to start the run over")
        why = "; ".join(verdict.reasons) or verdict.verdict
        plan.notes.append(f"no usable last.pt ({verdict.verdict}: {why}): the original command starts the run over")
        plan.verb = "started"


def prepare_resume(run_dir: Path, options: ResumeOptions) -> ResumePlan:
    """The ultralytics resume of `run_dir` (see the module docstring); nothing is written until it is applied."""
    from yolotui.runs.runconfig import read_run_config, set_flag, write_run_config

    run_dir = Path(run_dir)
    refuse_bad_values(options)
    config = read_run_config(run_dir)
    recorded: dict[str, Any] = config.get(NAME) if isinstance(config.get(NAME), dict) else {}
    python = str(recorded.get("python") or "")
    if not python:
        raise UserError(f"{run_dir}/run.yaml: no ultralytics.python entry; start the run again with yolotui train "
                        "--backend ultralytics")
    folder = save_dir(run_dir)
    plan = ResumePlan(device=options.device or config.get("device"))
    _checkpoint_plan(run_dir, python, folder, options.epochs, plan)
    stored = [str(a) for a in config["command"]]
    command = list(stored)
    for flag, value in (("--yolotui-batch", options.batch_size), ("--yolotui-workers", options.workers),
                        ("--yolotui-device", options.device)):
        if value is not None:
            command = set_flag(command, flag, value)
            plan.notes.append(f"{flag.replace('--yolotui-', '')} {value} for the resumed run")
    if command != stored:
        def rewrite() -> None:
            write_run_config(run_dir, {**read_run_config(run_dir), "command": command})

        plan.writes.append(rewrite)  # the changes hold for every later attempt too
    extra = {**resume_settings(folder), "resume_first": True}
    plan.spec = LaunchSpec(command=command, env={str(k): str(v) for k, v in (config.get("env") or {}).items()},
                           cwd=Path(config["cwd"]) if config.get("cwd") else None, extra=extra)
    return plan
