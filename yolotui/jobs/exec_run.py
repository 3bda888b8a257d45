"""Supervise any command as a detached run (the `exec` backend).

A command that runs the official YOLOv9 train_dual.py / train.py / train_triple.py of a checkout is recognised
and started with the official backend instead (jobs.official): progress, resume with --resume, remedies; one that
trains with ultralytics (`yolo train ...`, a script calling YOLO(...).train) with the ultralytics backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yolotui.backends import EXEC, get_backend
from yolotui.backends.base import CommandRequest
from yolotui.errors import UserError
from yolotui.jobs.launch import StartedRun, started
from yolotui.jobs.runextras import RunExtras


@dataclass
class ExecRequest:
    """Run `command` in PROJECT/NAME (numbered exp, exp2 ... unless `exist_ok`), restarted up to
    `max_restarts` times on failure; `save_signal`: it writes a checkpoint on SIGUSR1."""

    command: list[str]
    name: str | None = None  # default exp (the official trainer's --name when it is one)
    project: str | None = None  # default runs/exec (the official trainer's --project when it is one)
    exist_ok: bool = False
    max_restarts: int = 0
    save_signal: bool = False
    extras: RunExtras = field(default_factory=RunExtras)  # notifications, stall timeout (log growth), logging
    slurm: Any | None = None  # yolotui.placement.slurm.SlurmOptions: run it as a SLURM job


def exec_run(request: ExecRequest) -> StartedRun:
    """Create the run folder and start the supervised command."""
    from yolotui.placement.launcher import check_command, launch
    from yolotui.runs.store import create_run_dir, validate_name

    command = list(request.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UserError("no command given: put it after '--', e.g. yolotui exec -- python train.py")
    if request.max_restarts < 0:
        raise UserError(f"--max-restarts must be 0 or more (got {request.max_restarts})")
    from yolotui.backends.official.backend import recognise_command

    recognised = recognise_command(command)
    if recognised is not None:  # the official trainer: the same as `yolotui train --backend official`
        from yolotui.jobs.official import OfficialRunRequest, start_official

        result = start_official(OfficialRunRequest(
            recognised, max_attempts=request.max_restarts + 1,
            project=Path(request.project) if request.project is not None else None, name=request.name,
            exist_ok=True if request.exist_ok else None))
        result.notes.append(f"recognised the official trainer ({recognised.script} in {recognised.repo}): "
                            "supervised with the official backend (progress, --resume on retries)")
        return result
    from yolotui.backends.ultralytics import recognise_command as recognise_ultralytics

    ultralytics = recognise_ultralytics(command)
    if ultralytics is not None:  # ultralytics' trainer: the same as `yolotui train --backend ultralytics`
        from yolotui.jobs.ultralytics import UltralyticsRunRequest, start_ultralytics

        result = start_ultralytics(UltralyticsRunRequest(
            ultralytics, max_attempts=request.max_restarts + 1, extras=request.extras,
            project=Path(request.project) if request.project is not None else None, name=request.name,
            exist_ok=True if request.exist_ok else None))
        result.notes.append("recognised an ultralytics training: supervised with the ultralytics backend (progress, "
                            "ultralytics' resume from last.pt on retries)")
        return result
    request.name = request.name or "exp"
    request.project = request.project or "runs/exec"
    validate_name(request.name)
    check_command(command)
    run_extra = request.extras.entries()
    run_dir = create_run_dir(Path(request.project), request.name, exist_ok=request.exist_ok)
    backend = get_backend(EXEC)
    spec = backend.new_run_command(CommandRequest(run_dir=run_dir, argv=tuple(command)))
    extra = {**spec.extra, **run_extra, **({"save_signal": True} if request.save_signal else {})}
    launch(run_dir, spec.command, name=run_dir.name, backend=backend.name, max_attempts=request.max_restarts + 1,
           env=spec.env or None, cwd=spec.cwd, extra=extra or None, slurm=request.slurm)
    return started(run_dir, "started", [])
