"""Use cases of the official backend: start a run of the official trainer, resume or extend one.

`start_official` serves `yolotui train --backend official` and `yolotui exec -- python train_dual.py ...`;
`resume_official` serves `yolotui resume RUN` (and the resume wizard through jobs.resume) for official runs.
See yolotui/backends/official/backend.py for the command, the run.yaml entries and what the official trainer cannot do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yolotui.backends import get_backend
from yolotui.backends.base import CommandRequest
from yolotui.backends.official.backend import (
    NAME,
    OPT_ORIG,
    OfficialCommand,
    edit_opt_yaml,
    output_folder,
    read_opt,
    save_dir,
    split_flags,
)
from yolotui.errors import UserError
from yolotui.jobs.launch import StartedRun, launch_foreign_run, started
from yolotui.jobs.runextras import RunExtras
from yolotui.runs import layout


@dataclass
class OfficialRunRequest:
    """Start `command` (interpreter, checkout, script, official flags) as a new supervised run.

    project/name/exist_ok, when given, win over the official --project/--name/--exist-ok in the flags (which
    win over the official defaults runs/train and exp). `cwd`: the trainer's working folder (default: ours).
    """

    command: OfficialCommand
    max_attempts: int = 5
    backoff_s: float | None = None
    project: Path | None = None
    name: str | None = None
    exist_ok: bool | None = None
    cwd: Path | None = None
    extras: RunExtras = field(default_factory=RunExtras)  # notifications, stall timeout (log growth), logging


def check_interpreter(python: str) -> list[str]:
    """Lines about the trainer's interpreter (a bounded probe: versions and what breaks the official code);
    UserError when it cannot be run."""
    from yolotui.backends.official.environment import official_env_issues, probe_interpreter

    facts = probe_interpreter(python)
    if facts.get("error"):
        raise UserError(f"--python: {facts['error']}; give the interpreter that runs the official code")
    lines = [f"trainer: {facts.get('executable') or python} (Python {facts.get('python')}, torch "
             f"{facts.get('torch') or 'missing'}, numpy {facts.get('numpy') or '?'}, Pillow "
             f"{facts.get('pillow') or '?'})"]
    lines += [f"{issue.level}: {issue.message}" for issue in official_env_issues(facts)]
    if facts.get("torch") and not any("weights_only" in line for line in lines):
        lines.append(f"note: torch {facts['torch']} unpickles fully by default: the official loads work as they "
                     "are (no allow-list needed)")
    return lines


def start_official(request: OfficialRunRequest) -> StartedRun:
    """Create the run folder and start the official trainer under the supervisor."""
    from yolotui.runs import store

    cmd = request.command
    cwd = Path(request.cwd or Path.cwd()).resolve()
    if not (cmd.repo / cmd.script).is_file():
        raise UserError(f"{cmd.repo / cmd.script} not found: the official checkout has no {cmd.script}")
    flag_project, flag_name, flag_exist_ok, args = output_folder(cmd.args, cwd)
    if any(a == "--resume" or a.startswith("--resume=") for a in args):
        raise UserError("--resume: resume a yolotui run with `yolotui resume RUN` (it passes the official "
                        "--resume RUN/weights/last.pt itself)")
    project = Path(request.project) if request.project is not None else flag_project
    name = request.name or flag_name
    exist_ok = flag_exist_ok if request.exist_ok is None else request.exist_ok
    store.validate_name(name)
    run_extra = request.extras.entries()  # a bad --log-config is refused before the folder is made
    lines = check_interpreter(cmd.python)
    device, _ = split_flags(list(args), {"--device": 1})
    run_dir = launch_foreign_run(project, name, exist_ok, NAME, {"python": cmd.python, "repo": str(cmd.repo),
                                                                  "script": cmd.script}, args, run_extra, cwd,
                                 device.get("--device") or None, request.max_attempts, request.backoff_s)
    warnings = [line.split(": ", 1)[1] for line in lines if line.startswith("warning: ")]
    notes = [line for line in lines if not line.startswith("warning: ")]
    return started(run_dir, "started", warnings, notes)


def resume_official(run_dir: Path, epochs: int | None = None, batch_size: int | None = None,
                    device: str | None = None, workers: int | None = None) -> StartedRun:
    """Relaunch an official run with the official `--resume RUN/weights/last.pt` (options changed in opt.yaml).

    A finished, unstripped run extends to `epochs`; a stripped one (epoch -1) cannot: fine-tune it instead. With
    no usable last.pt the original command starts the run over.
    """
    from yolotui.health.verdict import FINISHED, RESUMABLE, diagnose_checkpoint
    from yolotui.placement.launcher import launch
    from yolotui.runs import lock
    from yolotui.runs.runconfig import RESERVED_KEYS, read_run_config, restart_settings

    run_dir = Path(run_dir)
    if lock.is_held(run_dir):
        raise UserError(f"run {run_dir} is still live: stop it first (yolotui stop {run_dir.name})")
    for flag, value, least in (("--epochs", epochs, 1), ("--batch-size", batch_size, 1), ("--workers", workers, 0)):
        if value is not None and value < least:
            raise UserError(f"{flag} {value}: must be at least {least}")
    config = read_run_config(run_dir)
    opt = read_opt(run_dir)
    planned = int(opt.get("epochs") or 0) or None
    last = layout.weights_dir(save_dir(run_dir)) / layout.LAST_PT
    verdict = diagnose_checkpoint(last, total_epochs=planned, find_fallback=False)
    notes: list[str] = []
    verb = "resumed"
    if verdict.verdict == FINISHED:
        if verdict.info is not None and verdict.info.epoch == -1:
            raise UserError(f"{last} is stripped (the official strip_optimizer ran: epoch -1, no optimizer), so the "
                            f"official trainer cannot extend it; fine-tune it instead: yolotui finetune --from "
                            f"{run_dir} --epochs N (or the fine-tune wizard)")
        if epochs is None or verdict.epoch is None or epochs <= verdict.epoch:
            raise UserError(f"run {run_dir.name} finished all {verdict.epoch} epochs: extend it with --epochs N "
                            f"(N > {verdict.epoch})")
        verb = "extending"
        notes.append(f"extending from epoch {verdict.epoch} to {epochs}: the official trainer re-plans its lr "
                     f"schedule for {epochs} epochs and continues at epoch {verdict.epoch}")
    elif verdict.verdict == RESUMABLE:
        if epochs is not None and verdict.epoch is not None and epochs <= verdict.epoch:
            raise UserError(f"--epochs {epochs}: the run has already done {verdict.epoch} epochs; give at least "
                            f"{verdict.epoch + 1}")
        notes.append(f"resuming from epoch {verdict.epoch} of {epochs or planned} with the official --resume {last}")
    else:
        why = "; ".join(verdict.reasons) or verdict.verdict
        notes.append(f"no usable last.pt ({verdict.verdict}: {why}): the original command starts the run over")
        verb = "started"
    changes = {k: v for k, v in (("epochs", epochs), ("batch_size", batch_size), ("device", device),
                                  ("workers", workers)) if v is not None}
    if changes:
        settings = edit_opt_yaml(run_dir, changes)
        if settings:
            notes.append("opt.yaml: " + ", ".join(f"{k} {a} -> {b}" for k, (a, b) in settings.items())
                         + f" (the official --resume reads it; the first version is kept as {OPT_ORIG})")
    spec = get_backend(NAME).resume_command(CommandRequest(run_dir=run_dir))
    max_attempts, backoff_s, _ = restart_settings(config)
    extra = {k: v for k, v in config.items() if k not in RESERVED_KEYS and k != "logout"}
    extra.update(spec.extra)
    restart = {k: v for k, v in (config.get("restart") or {}).items() if k not in ("max_attempts", "backoff_s")}
    from yolotui.runs.index import name_for

    launch(run_dir, spec.command, name=name_for(run_dir), backend=NAME,
           device=config.get("device"), max_attempts=max_attempts,
           env={str(k): str(v) for k, v in (config.get("env") or {}).items()}, extra=extra, backoff_s=backoff_s,
           cwd=Path(config["cwd"]) if config.get("cwd") else None, restart=restart)
    return started(run_dir, verb, [], notes)


@dataclass
class OfficialFinetuneRequest:
    """Fine-tune with the official trainer: a new official run from `source` (an official run or a .pt) with
    `--weights SOURCE/weights/best.pt --freeze N`, lr0 * lr_scale, new data. repo/python default to the source
    run's; `cfg` to the source run's opt.yaml cfg."""

    source: str
    data: str
    epochs: int = 30
    freeze: list[str] | None = None
    lr_scale: float = 0.1
    name: str | None = None
    project: str | None = None
    repo: str | None = None
    python: str | None = None
    extra_args: list[str] | None = None


def finetune_official(request: OfficialFinetuneRequest) -> StartedRun:
    """Start the official fine-tune run; its hyp file (the source's with lr0 scaled) is written into it."""
    import yaml

    from yolotui.backends.official.backend import find_repo, python_for
    from yolotui.jobs.finetune import resolve_source
    from yolotui.runs.atomic import atomic_write_text
    from yolotui.runs.runconfig import read_run_config

    source = resolve_source(request.source)
    if request.lr_scale <= 0 or request.epochs < 1:
        raise UserError("--lr-scale must be above 0 and --epochs at least 1")
    config: dict[str, Any] = {}
    if source.run_dir is not None and (source.run_dir / "run.yaml").exists():
        config = read_run_config(source.run_dir)
    recorded = config.get("official") if isinstance(config.get("official"), dict) else {}
    repo = find_repo(request.repo or recorded.get("repo"))
    python = python_for(request.python or recorded.get("python"))
    src_opt = read_opt(source.run_dir) if source.run_dir is not None else {}
    hyp: dict[str, Any] = {}
    if source.run_dir is not None and (source.run_dir / layout.HYP_YAML).exists():
        from yolotui.config import load_yaml

        hyp = load_yaml(source.run_dir / layout.HYP_YAML, "hyp.yaml")
    elif isinstance(src_opt.get("hyp"), dict):
        hyp = dict(src_opt["hyp"])
    if not hyp:
        raise UserError(f"{request.source}: no hyp.yaml beside the weights; fine-tune an official run folder, or "
                        "run the official train_dual.py --weights yourself under `yolotui exec`")
    hyp["lr0"] = float(hyp.get("lr0", 0.01)) * request.lr_scale
    cfg = src_opt.get("cfg") or ""
    if not cfg:  # a resumed run's opt.yaml has cfg '' (the official --resume rewrites it): the launch flags have it
        taken, _ = split_flags([str(a) for a in recorded.get("args") or []], {"--cfg": 1})
        cfg = str(taken.get("--cfg") or "")
    name = request.name or (f"{source.run_dir.name}-ft" if source.run_dir is not None else "finetune")
    project = Path(request.project) if request.project else (
        source.run_dir.parent if source.run_dir is not None else Path("runs/train"))
    args = ["--weights", str(source.checkpoint), "--data", request.data, "--epochs", str(request.epochs)]
    args += ["--cfg", str(cfg)]  # '' builds the model from the checkpoint's own yaml (the default, yolo.yaml, is no file)
    if request.freeze:
        args += ["--freeze", *[str(f) for f in request.freeze]]
    for key, flag in (("imgsz", "--img"), ("batch_size", "--batch-size"), ("device", "--device"),
                      ("workers", "--workers")):
        if src_opt.get(key) not in (None, ""):
            args += [flag, str(src_opt[key])]
    args += list(request.extra_args or [])
    hyp_file = Path(project).expanduser() / f".{name}.hyp.finetune.yaml"
    Path(project).expanduser().mkdir(parents=True, exist_ok=True)
    atomic_write_text(hyp_file, yaml.safe_dump(hyp, sort_keys=False))
    args += ["--hyp", str(hyp_file.resolve())]
    result = start_official(OfficialRunRequest(OfficialCommand(python=python, repo=repo, args=args),
                                               project=project, name=name))
    result.notes.append(f"fine-tuning with the official trainer from {source.checkpoint}: lr0 "
                        f"{hyp['lr0']:g} ({request.lr_scale:g} x the source's), data {request.data}"
                        + (f", --freeze {' '.join(map(str, request.freeze))}" if request.freeze else ""))
    return result
