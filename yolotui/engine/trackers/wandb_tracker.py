"""Weights & Biases (`--wandb PROJECT`): config once, metrics per epoch at step = epoch, checkpoints at the end.

The W&B run id is chosen before the first `wandb.init` and recorded in run.yaml's tracker_runs.wandb, then every
attempt, resume, extend and restart calls `wandb.init(id=..., resume="allow")` with it: one yolotui run is one
W&B run (the way W&B resumes). Offline mode is honoured (WANDB_MODE=offline, or the mode recorded at launch):
nothing leaves the machine, `wandb sync RUN/wandb/offline-run-*` uploads later. Files go to WANDB_DIR, else the
run folder (RUN/wandb/). Console capture is off (train.log stays yolotui's). Epochs already sent are counted in
the record (`epochs`), so a resume sends each epoch once and W&B's steps only grow.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from yolotui.engine.trackers.base import (
    FAILED,
    FINISHED,
    MissingPackage,
    Tracker,
    TrackerContext,
    remote_scalars,
)
from yolotui.runs.trackers import install_hint


class WandbTracker(Tracker):
    """One W&B run per yolotui run, resumed by its recorded id."""

    name = "wandb"
    background = True

    def __init__(self) -> None:
        self.run: Any = None
        self.ctx: TrackerContext | None = None

    def open(self, ctx: TrackerContext) -> set[int]:
        """wandb.init with the recorded id (chosen and recorded first if there is none)."""
        try:
            import wandb
        except ImportError as exc:
            raise MissingPackage(install_hint("wandb")) from exc
        settings = ctx.settings.wandb or {}
        record = ctx.records.get(self.name, {})
        project = str(settings.get("project"))
        run_id = record.get("id") if record.get("project") == project else None
        if not run_id:
            run_id = uuid.uuid4().hex[:8]
            ctx.record(self.name, id=run_id, project=project, epochs=0)  # the identity first: a retry keeps it
        self.finish_run()
        folder = os.environ.get("WANDB_DIR") or str(ctx.run_dir)
        options: dict[str, Any] = {"project": project, "id": str(run_id), "resume": "allow", "dir": folder,
                                   "name": ctx.run_name, "job_type": "train",
                                   "settings": wandb.Settings(console="off", silent=True)}
        if settings.get("entity"):
            options["entity"] = settings["entity"]
        if settings.get("mode") and not os.environ.get("WANDB_MODE"):
            options["mode"] = settings["mode"]
        self.run = wandb.init(**options)
        self.run.config.update(ctx.params(), allow_val_change=True)
        self.ctx = ctx
        if record.get("dir") != folder:
            ctx.record(self.name, dir=folder)
        sent = record.get("epochs") if record.get("id") == run_id else 0
        return set(range(int(sent))) if isinstance(sent, int) and sent > 0 else set()

    def log_epoch(self, epoch: int, event: dict[str, Any]) -> None:
        """The epoch's metrics at step = epoch; then the record counts it as sent."""
        self.run.log({**remote_scalars(event), "epoch": int(epoch)}, step=int(epoch))
        if self.ctx is not None:
            self.ctx.record(self.name, epochs=int(epoch) + 1)

    def finish(self, outcome: str, artefacts: list[Path]) -> None:
        """The checkpoints as one model artefact when finished; a stop marks the run preempted (to be resumed)."""
        if outcome == FINISHED:
            import wandb

            files = [Path(p) for p in artefacts if Path(p).is_file()]
            if files:
                artefact = wandb.Artifact(f"{_artefact_name(self.ctx)}-weights", type="model")
                for path in files:
                    artefact.add_file(str(path), name=path.name)
                self.run.log_artifact(artefact)
        elif outcome != FAILED:
            try:
                self.run.mark_preempting()
            except Exception:  # offline, or an older wandb: a plain finish below
                pass
        self.finish_run(exit_code=1 if outcome == FAILED else 0)

    def finish_run(self, exit_code: int = 0) -> None:
        """Finish the W&B run of this process if one is open."""
        run, self.run = self.run, None
        if run is not None:
            run.finish(exit_code=exit_code)


def _artefact_name(ctx: TrackerContext | None) -> str:
    """A W&B artefact name from the run's name (letters, digits, - _ . only)."""
    name = ctx.run_name if ctx is not None else "run"
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name) or "run"
