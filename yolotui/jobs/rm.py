"""Forget runs: drop ended runs from the index, and with `files` delete their folders too. Live runs are refused."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from yolotui.errors import UserError


@dataclass
class RemoveRequest:
    """Remove `runs` (names or folders). `files`: also delete each run folder from disk."""

    runs: list[str]
    files: bool = False


@dataclass
class RemoveResult:
    """The run folders dropped from the index, and those of them deleted from disk."""

    removed: list[Path] = field(default_factory=list)
    deleted: list[Path] = field(default_factory=list)


def remove(request: RemoveRequest) -> RemoveResult:
    """Check every run first (all must be ended: finished, failed, stopped or interrupted), then remove them."""
    from yolotui.runs import index, lock
    from yolotui.runs.layout import ENDED_STATES
    from yolotui.runs.resolve import resolve_run
    from yolotui.runs.status import effective_state

    if not request.runs:
        raise UserError("no run given: name the runs to remove (see `yolotui ls`)")
    folders: list[Path] = []
    for value in request.runs:
        run_dir = Path(resolve_run(value)).resolve()
        state = effective_state(run_dir)
        if lock.is_held(run_dir) or state not in ENDED_STATES:
            raise UserError(f"run {run_dir.name} is {state}: stop it first (yolotui stop {run_dir.name}); "
                            "nothing was removed")
        if run_dir not in folders:
            folders.append(run_dir)
    result = RemoveResult()
    for run_dir in folders:
        index.remove(run_dir)
        result.removed.append(run_dir)
        if request.files:
            try:
                shutil.rmtree(run_dir)
            except OSError as exc:
                raise UserError(f"{run_dir}: could not delete ({exc.strerror}); it is no longer listed") from exc
            result.deleted.append(run_dir)
    return result
