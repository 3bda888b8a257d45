"""Stop and save: what a user can do to a live run (yolotui.supervisor.control sends the signals)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from yolotui.supervisor.control import SaveResult, StopResult


@dataclass
class StopRequest:
    """Stop `run` (a name or folder): SIGTERM and a checkpoint, SIGKILL after `grace_s` (at once with
    `force`); `wait` for the supervisor to end."""

    run: str | Path
    force: bool = False
    grace_s: float = 30.0
    wait: bool = True


def resolve(run: str | Path) -> Path:
    """A run name or folder as its folder (UserError naming what is wrong)."""
    from yolotui.runs.resolve import resolve_run

    return Path(resolve_run(str(run)))


def stop(request: StopRequest) -> StopResult:
    """Stop the run; StopResult says what was sent and the state it ended in."""
    from yolotui.supervisor.control import stop as stop_run

    return stop_run(resolve(request.run), force=request.force, grace_s=request.grace_s, wait=request.wait)


def save(run: str | Path) -> SaveResult:
    """Ask the run's trainer to write a checkpoint now; UserError when the run is not running or its
    backend cannot (see Backend.capabilities.save_now)."""
    from yolotui.supervisor.control import save_now

    run_dir = resolve(run)
    note = cannot_note(run_dir, "save_now")
    if note is not None:
        from yolotui.errors import UserError

        raise UserError(f"run {run_dir.name}: {note}; nothing sent", exit_code=1)
    return save_now(run_dir)


def cannot_note(run_dir: Path, capability: str) -> str | None:
    """What the run's backend says it cannot do about `capability` (save_now, mid_epoch_stop), or None when
    it can or says nothing (the wizards and the stop screen show it instead of offering it silently)."""
    from yolotui.backends import get_backend
    from yolotui.errors import UserError
    from yolotui.runs.runconfig import read_backend

    try:
        return get_backend(read_backend(Path(run_dir))).cannot(capability)
    except UserError:  # a backend this install does not know: nothing to say about it
        return None


__all__ = ["SaveResult", "StopRequest", "StopResult", "cannot_note", "resolve", "save", "stop"]
