"""Supervise any command as a detached run (the `exec` backend)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from yolotui.backends import EXEC, get_backend
from yolotui.backends.base import CommandRequest
from yolotui.errors import UserError
from yolotui.jobs.results import StartedRun, started
from yolotui.jobs.runextras import RunExtras


@dataclass
class ExecRequest:
    """Run `command` in PROJECT/NAME (numbered exp, exp2 ... unless `exist_ok`), restarted up to
    `max_restarts` times on failure; `save_signal`: it writes a checkpoint on SIGUSR1."""

    command: list[str]
    name: str = "exp"
    project: str = "runs/exec"
    exist_ok: bool = False
    max_restarts: int = 0
    save_signal: bool = False
    extras: RunExtras = field(default_factory=RunExtras)  # notifications, stall timeout (log growth), logging


def exec_run(request: ExecRequest) -> StartedRun:
    """Create the run folder and start the supervised command."""
    from yolotui.runs.launcher import check_command, launch
    from yolotui.runs.store import create_run_dir, validate_name

    command = list(request.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UserError("no command given: put it after '--', e.g. yolotui exec -- python train.py")
    if request.max_restarts < 0:
        raise UserError(f"--max-restarts must be 0 or more (got {request.max_restarts})")
    validate_name(request.name)
    check_command(command)
    run_extra = request.extras.entries()
    run_dir = create_run_dir(Path(request.project), request.name, exist_ok=request.exist_ok)
    backend = get_backend(EXEC)
    spec = backend.new_run_command(CommandRequest(run_dir=run_dir, argv=tuple(command)))
    extra = {**spec.extra, **run_extra, **({"save_signal": True} if request.save_signal else {})}
    launch(run_dir, spec.command, name=run_dir.name, backend=backend.name, max_attempts=request.max_restarts + 1,
           env=spec.env or None, cwd=spec.cwd, extra=extra or None)
    return started(run_dir, "started", [])
