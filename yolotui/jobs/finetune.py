"""Fine-tune: a new run initialised from another run's (or a checkpoint's) weights.

The source is a run folder or name (its best.pt, else its last.pt) or a checkpoint file (a yolotui one or an
official YOLOv9 .pt). The new run keeps the source run's options and hyperparameters unless given, with lr0
multiplied by `lr_scale`; mosaic is closed over the last third of the epochs unless `close_mosaic` says
otherwise. Tensors are transferred by name and shape by the trainer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from yolotui.errors import UserError
from yolotui.jobs.launch import StartedRun
from yolotui.jobs.runextras import RunExtras
from yolotui.runs.resolve import FinetuneSource, resolve_source

# Options taken from the source run's opt.yaml when not given.
INHERITED = ("batch_size", "imgsz", "device", "workers", "optimizer", "seed", "cos_lr", "flat_cos_lr", "fixed_lr",
             "save_period_min")


@dataclass
class FinetuneRequest:
    """A fine-tuning run. `options` may hold any other training option (batch_size, imgsz, device, workers,
    hyp ...) under its dest name; missing ones come from the source run."""

    source: str
    data: str
    epochs: int = 30
    lr_scale: float = 0.1
    freeze: list[str] | None = None
    name: str | None = None
    project: str | None = None
    close_mosaic: int | None = None
    options: dict[str, Any] = field(default_factory=dict)
    layout: dict[str, Any] = field(default_factory=dict)
    extras: RunExtras = field(default_factory=RunExtras)
    slurm: Any | None = None  # yolotui.placement.slurm.SlurmOptions: run it as a SLURM job


def finetune_options(request: FinetuneRequest, source: FinetuneSource) -> dict[str, Any]:
    """The new run's training options: given ones, else the source run's, else the defaults."""
    from yolotui.config import load_yaml
    from yolotui.runs import layout

    source_run, ckpt = source.run_dir, source.checkpoint
    mapped = _foreign_options(source)
    if mapped is not None:  # another trainer's run or checkpoint (ultralytics YOLOv9 -> gelan-*)
        source_opt = mapped[0]
    else:
        source_opt = load_yaml(source_run / layout.OPT_YAML, "opt.yaml") if source_run else {}
    given: dict[str, Any] = {
        "weights": str(ckpt),
        "data": request.data,
        "epochs": request.epochs,
        "name": request.name or f"{(source_run.name if source_run else ckpt.stem)}-ft",
        "project": request.project or (str(source_run.parent) if source_run else "runs/train"),
        "close_mosaic": request.close_mosaic if request.close_mosaic is not None else request.epochs // 3,
        "freeze": request.freeze if request.freeze is not None else [0],
    }
    if source_opt.get("cfg") and request.options.get("cfg") is None:
        given["cfg"] = source_opt["cfg"]
    for key in INHERITED:
        value = request.options.get(key)
        if value is None:
            value = source_opt.get(key)
        if value is not None:
            given[key] = value
    if request.options.get("hyp") is not None:
        given["hyp"] = request.options["hyp"]
    elif source_run and (source_run / layout.HYP_YAML).exists():
        given["hyp"] = str(source_run / layout.HYP_YAML)
    return given


def _foreign_options(source: FinetuneSource) -> tuple[dict[str, Any], list[str]] | None:
    """(options, notes) a backend maps from another trainer's source run or checkpoint, or None when the source
    is yolotui's own (Backend.finetune_source_options)."""
    from yolotui.backends import backend_names, get_backend

    for name in backend_names():
        mapped = get_backend(name).finetune_source_options(source.checkpoint, source.run_dir)
        if mapped is not None:
            return mapped
    return None


def finetune(request: FinetuneRequest) -> StartedRun:
    """Resolve the source, prepare the new run (lr0 scaled), start it."""
    from yolotui.config import save_yaml
    from yolotui.jobs.new_run import NewRunRequest, launch_prepared, prepare_run
    from yolotui.runs import layout

    if request.epochs < 1:
        raise UserError(f"--epochs {request.epochs}: must be at least 1")
    if not math.isfinite(request.lr_scale) or request.lr_scale <= 0:
        raise UserError(f"--lr-scale {request.lr_scale}: give a finite number above 0")
    run_extra = request.extras.entries()  # a bad --log-config is refused before any folder is made
    source = resolve_source(request.source)
    prepared = prepare_run(finetune_options(request, source))
    hyp = dict(prepared.hyp)
    hyp["lr0"] = float(hyp["lr0"]) * float(request.lr_scale)
    try:
        save_yaml(prepared.run_dir / layout.HYP_YAML, hyp)
    except BaseException:
        from yolotui.runs import lock

        lock.release(prepared.lock_fd)
        raise
    prepared.hyp = hyp
    note = (f"fine-tuning from {source.checkpoint} (lr0 {hyp['lr0']:.3g}, freeze {prepared.opt['freeze']}, "
            f"{prepared.opt['epochs']} epochs)")
    notes = [note, *(_foreign_options(source) or ({}, []))[1]]
    return launch_prepared(prepared, NewRunRequest(options={}, layout=request.layout, slurm=request.slurm),
                           notes=notes, run_extra=run_extra)
