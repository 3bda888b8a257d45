"""Use cases of the ultralytics backend: start a run, resume or extend one, fine-tune from one.

`start_ultralytics` serves `yolotui train --backend ultralytics` and `yolotui exec -- yolo train ...`;
`resume_ultralytics` serves `yolotui resume RUN [--epochs M]` (and the resume wizard through jobs.resume);
`finetune_ultralytics` serves `yolotui finetune --backend ultralytics`, and `engine_finetune_options` lets
`yolotui finetune` (yolotui's engine) start from an ultralytics run. See yolotui/backends/ultralytics/ for the
command, the run.yaml entries and what ultralytics cannot do. Nothing here imports ultralytics or torch.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yolotui.backends import get_backend
from yolotui.backends.base import CommandRequest
from yolotui.backends.ultralytics import NAME, save_dir
from yolotui.backends.ultralytics.launch import interpreter_lines, output_folder, refuse_own_resume
from yolotui.backends.ultralytics.recognise import CLI, SCRIPT, UltralyticsCommand, parse_overrides
from yolotui.errors import UserError
from yolotui.jobs.launch import StartedRun, launch_foreign_run, started
from yolotui.jobs.runextras import RunExtras
from yolotui.runs import layout

# ultralytics' YOLOv9 detection models, as yolotui engine configs (the same layers, the head named DDetect).
ENGINE_CONFIGS = {"t": "gelan-t", "s": "gelan-s", "m": "gelan-m", "c": "gelan-c", "e": "gelan-e"}
_YOLOV9 = re.compile(r"^yolov9([tsmce])(\.yaml|\.pt)?$")


@dataclass
class UltralyticsRunRequest:
    """Start `command` as a new supervised run. project/name/exist_ok, when given, win over the ultralytics
    project=/name=/exist_ok= arguments (which win over ultralytics' defaults runs/<task> and train)."""

    command: UltralyticsCommand
    max_attempts: int = 5
    backoff_s: float | None = None
    project: Path | None = None
    name: str | None = None
    exist_ok: bool | None = None
    cwd: Path | None = None
    extras: RunExtras = field(default_factory=RunExtras)


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


def start_ultralytics(request: UltralyticsRunRequest) -> StartedRun:
    """Create the run folder and start ultralytics' trainer through the shim under the supervisor."""
    from yolotui.runs import store

    cmd = request.command
    cwd = Path(request.cwd or Path.cwd()).resolve()
    refuse_own_resume(cmd)
    if cmd.mode == SCRIPT and (cmd.script is None or not cmd.script.is_file()):
        raise UserError(f"{cmd.script}: no such script")
    if cmd.mode == CLI:
        check_paths(cmd, cwd)
    flag_project, flag_name, flag_exist_ok = output_folder(cmd, cwd)
    project = Path(request.project).expanduser() if request.project is not None else flag_project
    project = project if project.is_absolute() else cwd / project
    name = request.name or flag_name
    exist_ok = flag_exist_ok if request.exist_ok is None else request.exist_ok
    store.validate_name(name)
    run_extra = request.extras.entries()  # a bad --log-config is refused before the folder is made
    notes = interpreter_lines(cmd.python)
    run_dir = launch_foreign_run(project, name, exist_ok, NAME, {"python": cmd.python, "mode": cmd.mode,
                                                                  "script": str(cmd.script or "") or None},
                                 cmd.args, run_extra, cwd, cmd.overrides().get("device") or None,
                                 request.max_attempts, request.backoff_s)
    notes.append(f"ultralytics writes into the run folder (its save_dir, recorded in run.yaml): {run_dir}")
    return started(run_dir, "started", [], notes)


def _with_flag(command: list[str], flag: str, value: Any) -> list[str]:
    from yolotui.supervisor.policy import set_flag

    return set_flag(command, flag, value) if value is not None else command


def resume_ultralytics(run_dir: Path, epochs: int | None = None, batch_size: int | None = None,
                       device: str | None = None, workers: int | None = None) -> StartedRun:
    """Relaunch an ultralytics run with ultralytics' resume from its last.pt; `epochs` above the plan extends it
    (the checkpoint's train_args rewritten, a copy kept); without a usable last.pt the original command starts
    over. A stripped final last.pt with no unstripped copy is refused with the fine-tune to use instead."""
    from yolotui.backends.ultralytics.checkpoint import extend_source, verdict_of
    from yolotui.backends.ultralytics.launch import extend_checkpoint
    from yolotui.health.verdict import FINISHED, RESUMABLE
    from yolotui.placement.launcher import launch
    from yolotui.runs import lock
    from yolotui.runs.runconfig import RESERVED_KEYS, read_run_config, write_run_config
    from yolotui.supervisor.policy import restart_settings

    run_dir = Path(run_dir)
    if lock.is_held(run_dir):
        raise UserError(f"run {run_dir.name} is still live: stop it first (yolotui stop {run_dir.name})")
    for flag, value, least in (("--epochs", epochs, 1), ("--batch-size", batch_size, 1), ("--workers", workers, 0)):
        if value is not None and value < least:
            raise UserError(f"{flag} {value}: must be at least {least}")
    config = read_run_config(run_dir)
    recorded = config.get(NAME) if isinstance(config.get(NAME), dict) else {}
    python = str(recorded.get("python") or "")
    if not python:
        raise UserError(f"{run_dir}/run.yaml: no ultralytics.python entry; start the run again with yolotui train "
                        "--backend ultralytics")
    weights = save_dir(run_dir) / layout.WEIGHTS_DIR
    last = weights / layout.LAST_PT
    verdict = verdict_of(last)
    done, planned = verdict.epoch, verdict.total_epochs
    notes: list[str] = []
    verb = "resumed"
    if verdict.verdict == FINISHED:
        if epochs is None or done is None or epochs <= done:
            raise UserError(f"run {run_dir.name} finished all {done} epochs: extend it with --epochs N (N > {done})")
        source = extend_source(weights)
        if source.path is None:
            raise UserError(f"{last}: {source.reason}; fine-tune it instead: yolotui finetune --from {run_dir} "
                            f"--backend ultralytics --data DATA --epochs N (or the fine-tune wizard)")
        notes += extend_checkpoint(python, weights, source.path, epochs)
        verb = "extending"
        notes.append(f"extending from epoch {done} to {epochs} with ultralytics' resume=True: its lr schedule is "
                     f"re-planned for {epochs} epochs and training continues at epoch {done + 1}")
    elif verdict.verdict == RESUMABLE:
        if epochs is not None and done is not None and epochs <= done:
            raise UserError(f"--epochs {epochs}: the run has already done {done} epochs; give at least {done + 1}")
        if epochs is not None and epochs != planned:
            notes += extend_checkpoint(python, weights, last, epochs)
            verb = "extending" if planned is not None and epochs > planned else "resumed"
        notes.append(f"resuming from epoch {done} of {epochs or planned} with ultralytics' resume=True from {last}")
    else:
        if epochs is not None:
            raise UserError(f"--epochs {epochs}: {last} is not resumable ({verdict.verdict}: "
                            f"{'; '.join(verdict.reasons)}); resume without --epochs to start the run over")
        why = "; ".join(verdict.reasons) or verdict.verdict
        notes.append(f"no usable last.pt ({verdict.verdict}: {why}): the original command starts the run over")
        verb = "started"
    command = [str(a) for a in config["command"]]
    for flag, value in (("--yolotui-batch", batch_size), ("--yolotui-workers", workers), ("--yolotui-device", device)):
        command = _with_flag(command, flag, value)
        if value is not None:
            notes.append(f"{flag.replace('--yolotui-', '')} {value} for the resumed run")
    if command != [str(a) for a in config["command"]]:
        write_run_config(run_dir, {**config, "command": command})  # the changes hold for every later attempt too
    spec = get_backend(NAME).resume_command(CommandRequest(run_dir=run_dir))
    max_attempts, backoff_s, _ = restart_settings(config)
    extra = {k: v for k, v in config.items() if k not in RESERVED_KEYS and k != "logout"}
    extra.update(spec.extra)
    restart = {k: v for k, v in (config.get("restart") or {}).items() if k not in ("max_attempts", "backoff_s")}
    launch(run_dir, spec.command, name=str(config.get("name") or run_dir.name), backend=NAME,
           device=device or config.get("device"), max_attempts=max_attempts,
           env={str(k): str(v) for k, v in (config.get("env") or {}).items()}, extra=extra, backoff_s=backoff_s,
           cwd=Path(config["cwd"]) if config.get("cwd") else None, restart=restart)
    return started(run_dir, verb, [], notes)


# ------------------------------------------------------------------------------------------- fine-tune

@dataclass
class UltralyticsFinetuneRequest:
    """Fine-tune with ultralytics: a new ultralytics run from `source` (an ultralytics run or a .pt) with
    `model=SOURCE freeze=N lr0=lr0*lr_scale data=DATA epochs=N`; python defaults to the source run's."""

    source: str
    data: str
    epochs: int = 30
    freeze: list[str] | None = None
    lr_scale: float = 0.1
    name: str | None = None
    project: str | None = None
    python: str | None = None
    imgsz: int | None = None
    batch_size: int | None = None
    device: str | None = None
    workers: int | None = None


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


def finetune_ultralytics(request: UltralyticsFinetuneRequest) -> StartedRun:
    """Start an ultralytics fine-tune run (`model=SOURCE`, freeze, lower lr0, new data)."""
    import math

    from yolotui.runs.runconfig import read_run_config

    if request.epochs < 1:
        raise UserError(f"--epochs {request.epochs}: must be at least 1")
    if not math.isfinite(request.lr_scale) or request.lr_scale <= 0:
        raise UserError(f"--lr-scale {request.lr_scale}: give a finite number above 0")
    checkpoint, run_dir = ultralytics_source(request.source)
    recorded: dict[str, Any] = {}
    if run_dir is not None and (run_dir / "run.yaml").exists():
        config = read_run_config(run_dir)
        recorded = config.get(NAME) if isinstance(config.get(NAME), dict) else {}
    python = request.python or recorded.get("python")
    if not python:
        import sys

        python = sys.executable
    train_args = _source_train_args(checkpoint)
    lr0 = float(train_args.get("lr0") or 0.01) * request.lr_scale
    optimizer = str(train_args.get("optimizer") or "auto")
    optimizer = "SGD" if optimizer.lower() == "auto" else optimizer  # auto would ignore lr0 (it picks its own)
    args = ["train", f"model={checkpoint}", f"data={request.data}", f"epochs={request.epochs}", f"lr0={lr0:g}",
            f"optimizer={optimizer}"]
    if request.freeze:
        freeze = request.freeze[0] if len(request.freeze) == 1 else "[" + ",".join(request.freeze) + "]"
        if str(freeze) == "backbone":
            freeze = "10"  # ultralytics' YOLOv9 backbones are layers 0-9
        args.append(f"freeze={freeze}")
    for key, value in (("imgsz", request.imgsz or train_args.get("imgsz")),
                       ("batch", request.batch_size or train_args.get("batch")),
                       ("device", request.device or train_args.get("device")),
                       ("workers", request.workers if request.workers is not None else train_args.get("workers")),
                       ("amp", train_args.get("amp")), ("plots", train_args.get("plots"))):
        if value not in (None, ""):
            args.append(f"{key}={value}")
    name = request.name or (f"{run_dir.name}-ft" if run_dir is not None else f"{checkpoint.stem}-ft")
    project = Path(request.project).expanduser() if request.project else (
        run_dir.parent if run_dir is not None else Path("runs/detect"))
    cmd = UltralyticsCommand(python=str(python), mode=CLI, args=args)
    result = start_ultralytics(UltralyticsRunRequest(cmd, project=project, name=name))
    result.notes.append(f"fine-tuning with ultralytics from {checkpoint}: lr0 {lr0:g} ({request.lr_scale:g} x the "
                        f"source's), data {request.data}"
                        + (f", freeze {' '.join(request.freeze)}" if request.freeze else ""))
    return result


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


__all__ = ["UltralyticsFinetuneRequest", "UltralyticsRunRequest", "engine_finetune_options", "finetune_ultralytics",
           "is_ultralytics_run", "parse_overrides", "resume_ultralytics", "start_ultralytics"]
