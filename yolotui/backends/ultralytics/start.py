"""New runs of ultralytics' trainer, planned for yolotui.jobs.foreign to start: `yolotui train --backend
ultralytics`, `yolotui exec -- yolo train ...` and `yolotui finetune --backend ultralytics`; and what a fine-tune
with yolotui's engine takes from an ultralytics run (engine_finetune_options). Nothing here imports ultralytics
or torch.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from yolotui.backends.base import NewRunPlan
from yolotui.backends.ultralytics.launch import (
    NAME,
    interpreter_lines,
    output_folder,
    refuse_own_resume,
    save_dir,
)
from yolotui.backends.ultralytics.recognise import CLI, SCRIPT, UltralyticsCommand, parse_overrides
from yolotui.errors import UserError
from yolotui.runs import layout

# ultralytics' YOLOv9 detection models, as yolotui engine configs (the same layers, the head named DDetect).
ENGINE_CONFIGS = {"t": "gelan-t", "s": "gelan-s", "m": "gelan-m", "c": "gelan-c", "e": "gelan-e"}
_YOLOV9 = re.compile(r"^yolov9([tsmce])(\.yaml|\.pt)?$")


def check_paths(cmd: UltralyticsCommand, cwd: Path) -> None:
    """UserError for a data= or model= path that names a missing file (ultralytics' own names, such as
    coco8.yaml or yolov9t.yaml, are left to it)."""
    given = cmd.overrides()
    for key, suffixes in (("data", (".yaml", ".yml")), ("model", (".pt", ".yaml", ".yml"))):
        value = given.get(key)
        if not value or not value.endswith(suffixes) or (os.sep not in value and not value.startswith(".")):
            continue
        path = Path(value).expanduser()
        if not (path if path.is_absolute() else cwd / path).is_file():
            raise UserError(f"{key}={value}: no such file; give the path of your {key} file")


def plan_start(cmd: UltralyticsCommand, project: Path | None = None, name: str | None = None,
               exist_ok: bool | None = None, cwd: Path | None = None) -> NewRunPlan:
    """The new run of `cmd`: project/name/exist_ok, when given, win over the ultralytics project=/name=/exist_ok=
    arguments (which win over ultralytics' defaults runs/<task> and train)."""
    from yolotui.runs import store

    cwd = Path(cwd or Path.cwd()).resolve()
    refuse_own_resume(cmd)
    if cmd.mode == SCRIPT and (cmd.script is None or not cmd.script.is_file()):
        raise UserError(f"{cmd.script}: no such script")
    if cmd.mode == CLI:
        check_paths(cmd, cwd)
    flag_project, flag_name, flag_exist_ok = output_folder(cmd, cwd)
    folder = Path(project).expanduser() if project is not None else flag_project
    name = name or flag_name
    store.validate_name(name)
    notes = interpreter_lines(cmd.python)
    notes.append("ultralytics writes into the run folder (its save_dir, recorded in run.yaml)")
    return NewRunPlan(project=folder if folder.is_absolute() else cwd / folder, name=name,
                      exist_ok=flag_exist_ok if exist_ok is None else exist_ok,
                      opt={"python": cmd.python, "mode": cmd.mode, "script": str(cmd.script or "") or None},
                      argv=list(cmd.args), cwd=cwd, device=cmd.overrides().get("device") or None, notes=notes)


def ultralytics_source(value: str) -> tuple[Path, Path | None]:
    """(checkpoint, its run folder or None) for a --from naming an ultralytics run, its weights or a .pt."""
    path = Path(value).expanduser()
    if path.is_file():
        run_dir = path.parent.parent if path.parent.name == "weights" else None
        return path.resolve(), run_dir.resolve() if run_dir is not None else None
    if not path.is_dir():
        from yolotui.runs.resolve import resolve_run

        path = Path(resolve_run(value))
    folder = save_dir(path)
    for name in ("best.pt", "last.pt"):
        if (folder / "weights" / name).is_file():
            return (folder / "weights" / name).resolve(), path.resolve()
    raise UserError(f"--from {value}: {folder} has no weights/best.pt or last.pt yet")


def _source_train_args(checkpoint: Path) -> dict[str, Any]:
    """The training arguments recorded in an ultralytics checkpoint (scanned, never unpickled); {} otherwise."""
    from yolotui.health.checkpoint import ULTRALYTICS, inspect_checkpoint

    info = inspect_checkpoint(checkpoint, verify_hash=False)
    if info.kind != ULTRALYTICS:
        return {}
    return dict(info.opt or {})


def finetune_plan(args: Any) -> NewRunPlan:
    """`yolotui finetune --backend ultralytics`: a new ultralytics run from --from (`model=SOURCE`, freeze, lower
    lr0, new data); the interpreter defaults to the source run's."""
    import math
    import sys

    from yolotui.runs.runconfig import read_run_config

    if args.epochs < 1:
        raise UserError(f"--epochs {args.epochs}: must be at least 1")
    if not math.isfinite(args.lr_scale) or args.lr_scale <= 0:
        raise UserError(f"--lr-scale {args.lr_scale}: give a finite number above 0")
    checkpoint, run_dir = ultralytics_source(args.source)
    recorded: dict[str, Any] = {}
    if run_dir is not None and (run_dir / "run.yaml").exists():
        config = read_run_config(run_dir)
        recorded = config.get(NAME) if isinstance(config.get(NAME), dict) else {}
    python = getattr(args, "python", None) or recorded.get("python") or sys.executable
    train_args = _source_train_args(checkpoint)
    lr0 = float(train_args.get("lr0") or 0.01) * args.lr_scale
    optimizer = str(train_args.get("optimizer") or "auto")
    optimizer = "SGD" if optimizer.lower() == "auto" else optimizer  # auto would ignore lr0 (it picks its own)
    argv = ["train", f"model={checkpoint}", f"data={args.data}", f"epochs={args.epochs}", f"lr0={lr0:g}",
            f"optimizer={optimizer}"]
    if args.freeze:
        freeze = args.freeze[0] if len(args.freeze) == 1 else "[" + ",".join(args.freeze) + "]"
        if str(freeze) == "backbone":
            freeze = "10"  # ultralytics' YOLOv9 backbones are layers 0-9
        argv.append(f"freeze={freeze}")
    workers = getattr(args, "workers", None)
    for key, value in (("imgsz", getattr(args, "imgsz", None) or train_args.get("imgsz")),
                       ("batch", getattr(args, "batch_size", None) or train_args.get("batch")),
                       ("device", getattr(args, "device", None) or train_args.get("device")),
                       ("workers", workers if workers is not None else train_args.get("workers")),
                       ("amp", train_args.get("amp")), ("plots", train_args.get("plots"))):
        if value not in (None, ""):
            argv.append(f"{key}={value}")
    name = args.name or (f"{run_dir.name}-ft" if run_dir is not None else f"{checkpoint.stem}-ft")
    project = Path(args.project).expanduser() if args.project else (
        run_dir.parent if run_dir is not None else Path("runs/detect"))
    plan = plan_start(UltralyticsCommand(python=str(python), mode=CLI, args=argv), project=project, name=name)
    plan.notes.append(f"fine-tuning with ultralytics from {checkpoint}: lr0 {lr0:g} ({args.lr_scale:g} x the "
                      f"source's), data {args.data}" + (f", freeze {' '.join(args.freeze)}" if args.freeze else ""))
    return plan


def engine_config_for(checkpoint: Path, run_dir: Path | None = None) -> tuple[str, str]:
    """(yolotui engine config, why) for the ultralytics model in `checkpoint`; UserError when none maps.

    The model is named by the run's launch arguments, else the checkpoint's train_args (a resumed run's say
    last.pt), else the model config file its pickled model recorded."""
    from yolotui.backends.ultralytics.checkpoint import model_yaml_file

    names = []
    if run_dir is not None and (Path(run_dir) / "run.yaml").exists():
        from yolotui.runs.runconfig import run_yaml_field

        recorded = run_yaml_field(Path(run_dir), NAME)
        if isinstance(recorded, dict):
            names.append(parse_overrides([str(a) for a in recorded.get("args") or []]).get("model"))
    names += [_source_train_args(checkpoint).get("model"), model_yaml_file(checkpoint)]
    models = [Path(str(n)).name.lower() for n in names if n]
    model = next((m for m in models if _YOLOV9.match(m)), models[0] if models else "")
    match = _YOLOV9.match(model)
    if match is None:
        raise UserError(f"--from {checkpoint}: ultralytics model {model or '?'} has no yolotui engine counterpart "
                        "(ultralytics' yolov9t/s/m/c/e map to gelan-t/s/m/c/e); fine-tune it with --backend "
                        "ultralytics instead")
    config = ENGINE_CONFIGS[match.group(1)]
    return config, (f"ultralytics {model} has the layers of yolotui's {config} (its head is named Detect there, "
                    "DDetect here): tensors are transferred by name and shape, and the trainer reports how many "
                    "did not map (the box head's grouped convolutions differ, so they start fresh)")


def engine_finetune_options(checkpoint: Path, run_dir: Path | None) -> tuple[dict[str, Any], list[str]]:
    """Training options an engine fine-tune inherits from an ultralytics source (cfg, imgsz, batch, workers),
    and the notes that say what maps."""
    cfg, why = engine_config_for(checkpoint, run_dir)
    args = {}
    if run_dir is not None:
        from yolotui.backends.ultralytics.launch import read_args_yaml

        args = read_args_yaml(save_dir(run_dir))
    args = args or _source_train_args(checkpoint)
    options: dict[str, Any] = {"cfg": cfg}
    for key, ours in (("imgsz", "imgsz"), ("batch", "batch_size"), ("workers", "workers")):
        value = args.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= (0 if ours == "workers" else 1):
            options[ours] = value
    return options, [why]


def is_ultralytics_run(run_dir: Path | None) -> bool:
    """True for a run folder whose run.yaml names the ultralytics backend (or that holds ultralytics' args.yaml)."""
    if run_dir is None:
        return False
    from yolotui.runs.runconfig import read_backend

    return read_backend(Path(run_dir), default="") == NAME or (
        (Path(run_dir) / "args.yaml").exists() and not (Path(run_dir) / layout.OPT_YAML).exists())
