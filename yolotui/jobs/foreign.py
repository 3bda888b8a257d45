"""Start a new run of another project's trainer from its backend's plan (yolotui.backends.base.NewRunPlan).

`yolotui train --backend NAME`, `yolotui finetune --backend NAME` and `yolotui exec -- COMMAND` (a command a
backend recognises) all end here: the backend plans the folder, its record and arguments; this module makes
the folder and starts the backend's command under the supervisor, the same way for every backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from yolotui.jobs.launch import StartedRun, launch_foreign_run, started
from yolotui.jobs.runextras import RunExtras


def start_planned(backend: str, plan: Any, max_attempts: int = 5, backoff_s: float | None = None,
                  extras: RunExtras | None = None) -> StartedRun:
    """Make the plan's run folder and start `backend`'s command in it; the plan's notes and warnings reported."""
    run_extra = (extras or RunExtras()).entries()  # a bad --log-config is refused before the folder is made
    notes = list(plan.notes)
    for write in plan.writes:
        notes += write() or []
    run_dir = launch_foreign_run(Path(plan.project), plan.name, plan.exist_ok, backend, plan.opt, plan.argv,
                                 run_extra, Path(plan.cwd), plan.device, max_attempts, backoff_s)
    return started(run_dir, "started", list(plan.warnings), notes)
