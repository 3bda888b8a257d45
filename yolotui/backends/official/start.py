"""New runs of the official trainer, planned for yolotui.jobs.foreign to start: `yolotui train --backend
official`, `yolotui exec -- python train_dual.py ...` and `yolotui finetune --backend official`.

See backend.py for the command, the run.yaml entries and what the official trainer cannot do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from yolotui.backends.base import NewRunPlan
from yolotui.backends.official.backend import (
    YOLOTUI_FLAGS,
    OfficialCommand,
    find_repo,
    output_folder,
    python_for,
    read_opt,
    split_flags,
)
from yolotui.errors import UserError
from yolotui.runs import layout


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


def plan_start(cmd: OfficialCommand, project: Path | None = None, name: str | None = None,
               exist_ok: bool | None = None, cwd: Path | None = None) -> NewRunPlan:
    """The new run of `cmd`: project/name/exist_ok, when given, win over the official --project/--name/--exist-ok
    in its flags (which win over the official defaults runs/train and exp)."""
    from yolotui.runs import store

    cwd = Path(cwd or Path.cwd()).resolve()
    if not (cmd.repo / cmd.script).is_file():
        raise UserError(f"{cmd.repo / cmd.script} not found: the official checkout has no {cmd.script}")
    flag_project, flag_name, flag_exist_ok, args = output_folder(cmd.args, cwd)
    if any(a == "--resume" or a.startswith("--resume=") for a in args):
        raise UserError("--resume: resume a yolotui run with `yolotui resume RUN` (it passes the official "
                        "--resume RUN/weights/last.pt itself)")
    name = name or flag_name
    store.validate_name(name)
    lines = check_interpreter(cmd.python)
    device, _ = split_flags(list(args), {"--device": 1})
    return NewRunPlan(project=Path(project) if project is not None else flag_project, name=name,
                      exist_ok=flag_exist_ok if exist_ok is None else exist_ok,
                      opt={"python": cmd.python, "repo": str(cmd.repo), "script": cmd.script}, argv=list(args),
                      cwd=cwd, device=device.get("--device") or None,
                      warnings=[line.split(": ", 1)[1] for line in lines if line.startswith("warning: ")],
                      notes=[line for line in lines if not line.startswith("warning: ")])


def train_plan(args: Any) -> NewRunPlan:
    """`yolotui train --backend official`: the official script of --repo, every other flag passed to it."""
    if getattr(args, "mlflow", None) is not None or getattr(args, "wandb", None) is not None \
            or getattr(args, "tensorboard", None) is not None:
        raise UserError("--mlflow, --wandb and --no-tensorboard are for yolotui's engine; the official trainer writes "
                        "its own TensorBoard files in its run folder (see `yolotui tensorboard RUN`)")
    _, script_args = split_flags(list(getattr(args, "raw_argv", []) or []), YOLOTUI_FLAGS)
    cmd = OfficialCommand(python=python_for(args.python), repo=find_repo(args.repo), script=args.script,
                          args=script_args)
    return plan_start(cmd)


def _source_hyp(source_run: Path | None, src_opt: dict[str, Any], value: str) -> dict[str, Any]:
    """The source run's hyperparameters (hyp.yaml beside its weights, else opt.yaml's hyp)."""
    hyp: dict[str, Any] = {}
    if source_run is not None and (source_run / layout.HYP_YAML).exists():
        from yolotui.config import load_yaml

        hyp = load_yaml(source_run / layout.HYP_YAML, "hyp.yaml")
    elif isinstance(src_opt.get("hyp"), dict):
        hyp = dict(src_opt["hyp"])
    if not hyp:
        raise UserError(f"{value}: no hyp.yaml beside the weights; fine-tune an official run folder, or "
                        "run the official train_dual.py --weights yourself under `yolotui exec`")
    return hyp


def finetune_plan(args: Any) -> NewRunPlan:
    """`yolotui finetune --backend official`: a new official run from --from (`--weights SOURCE --freeze N`,
    lr0 * --lr-scale in a hyp file written beside the run, new data); repo/python default to the source run's."""
    import yaml

    from yolotui.runs.atomic import atomic_write_text
    from yolotui.runs.resolve import resolve_source
    from yolotui.runs.runconfig import read_run_config

    source = resolve_source(args.source)
    if args.lr_scale <= 0 or args.epochs < 1:
        raise UserError("--lr-scale must be above 0 and --epochs at least 1")
    config: dict[str, Any] = {}
    if source.run_dir is not None and (source.run_dir / "run.yaml").exists():
        config = read_run_config(source.run_dir)
    recorded = config.get("official") if isinstance(config.get("official"), dict) else {}
    repo = find_repo(getattr(args, "repo", None) or recorded.get("repo"))
    python = python_for(getattr(args, "python", None) or recorded.get("python"))
    src_opt = read_opt(source.run_dir) if source.run_dir is not None else {}
    hyp = _source_hyp(source.run_dir, src_opt, args.source)
    hyp["lr0"] = float(hyp.get("lr0", 0.01)) * args.lr_scale
    cfg = src_opt.get("cfg") or ""
    if not cfg:  # a resumed run's opt.yaml has cfg '' (the official --resume rewrites it): the launch flags have it
        taken, _ = split_flags([str(a) for a in recorded.get("args") or []], {"--cfg": 1})
        cfg = str(taken.get("--cfg") or "")
    name = args.name or (f"{source.run_dir.name}-ft" if source.run_dir is not None else "finetune")
    project = Path(args.project) if args.project else (
        source.run_dir.parent if source.run_dir is not None else Path("runs/train"))
    argv = ["--weights", str(source.checkpoint), "--data", args.data, "--epochs", str(args.epochs)]
    argv += ["--cfg", str(cfg)]  # '' builds the model from the checkpoint's own yaml (the default is no file)
    if args.freeze:
        argv += ["--freeze", *[str(f) for f in args.freeze]]
    for key, flag in (("imgsz", "--img"), ("batch_size", "--batch-size"), ("device", "--device"),
                      ("workers", "--workers")):
        if src_opt.get(key) not in (None, ""):
            argv += [flag, str(src_opt[key])]
    hyp_file = Path(project).expanduser() / f".{name}.hyp.finetune.yaml"
    Path(project).expanduser().mkdir(parents=True, exist_ok=True)
    atomic_write_text(hyp_file, yaml.safe_dump(hyp, sort_keys=False))
    argv += ["--hyp", str(hyp_file.resolve())]
    plan = plan_start(OfficialCommand(python=python, repo=repo, args=argv), project=project, name=name)
    plan.notes.append(f"fine-tuning with the official trainer from {source.checkpoint}: lr0 "
                      f"{hyp['lr0']:g} ({args.lr_scale:g} x the source's), data {args.data}"
                      + (f", --freeze {' '.join(map(str, args.freeze))}" if args.freeze else ""))
    return plan
