"""Supervise any command as a detached run (the `exec` backend).

A command that a backend recognises as its trainer (Backend.recognise: the official YOLOv9 train_dual.py of a
checkout, `yolo train ...` of ultralytics ...) is started with that backend instead (jobs.foreign): progress,
resume, remedies.
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
    recognised = _recognised_run(command, request)
    if recognised is not None:  # a backend's trainer: the same run as `yolotui train --backend NAME`
        return recognised
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


def _recognised_run(command: list[str], request: ExecRequest) -> StartedRun | None:
    """The run started by the first backend that recognises `command` as its trainer (Backend.recognise), or
    None for a command no backend claims."""
    from yolotui.backends import backend_names
    from yolotui.jobs.foreign import start_planned

    cwd = Path.cwd()
    for name in backend_names():
        backend = get_backend(name)
        found = backend.recognise(command, cwd)
        if found is None:
            continue
        recognised, note = found
        plan = backend.exec_plan(recognised, Path(request.project) if request.project is not None else None,
                                 request.name, True if request.exist_ok else None, cwd)
        result = start_planned(backend.name, plan, max_attempts=request.max_restarts + 1, extras=request.extras)
        result.notes.append(note)
        return result
    return None
