"""MLflow (`--mlflow [URI]`): params once, metrics per epoch at step = epoch, best and last checkpoints at the end.

The tracking URI is run.yaml's trackers.mlflow.uri (the launcher's --mlflow URI or MLFLOW_TRACKING_URI), else a
local file store beside the run folder (PROJECT/mlruns). The first attempt creates the MLflow run and records its
id in run.yaml's tracker_runs.mlflow; every later attempt, resume, extend and restart re-opens that run (status
RUNNING again), so one yolotui run is one MLflow run. Epochs are sent once their checkpoint is written; the run's
own metric history says which epochs it already has, so nothing is sent twice. Params cannot change in MLflow: an
option a resume changed (an extend's epochs) is added as a `yolotui.changed.KEY` tag instead.

MLflow 3 refuses a file store unless MLFLOW_ALLOW_FILE_STORE=true; this tracker sets that for file: URIs (and
short HTTP retries, so a server that is down costs seconds, not minutes, on the tracker's own thread).
"""

from __future__ import annotations

import os
import time
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
from yolotui.runs.trackers import DEFAULT_EXPERIMENT, default_mlflow_uri, install_hint

STEP_KEY = "fitness"  # the metric whose history says which epochs the MLflow run holds
MAX_PARAMS_PER_CALL = 90  # MLflow takes at most 100 params in one log_batch
PARAM_KEY_CHARS = 250


class MlflowTracker(Tracker):
    """One MLflow run per yolotui run, through MlflowClient (no global active-run state)."""

    name = "mlflow"
    background = True

    def __init__(self) -> None:
        self.client: Any = None
        self.run_id: str | None = None
        self.ctx: TrackerContext | None = None

    def open(self, ctx: TrackerContext) -> set[int]:
        """Create or re-open the MLflow run; log the params it lacks; return the epochs it has."""
        settings = ctx.settings.mlflow or {}
        record = ctx.records.get(self.name, {})
        uri = settings.get("uri") or record.get("uri") or default_mlflow_uri(ctx.run_dir)
        if str(uri).startswith("file:"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")
        try:
            from mlflow import MlflowClient
            from mlflow.entities import Param, RunTag
        except ImportError as exc:
            raise MissingPackage(install_hint("mlflow")) from exc
        self.ctx = ctx
        client = MlflowClient(tracking_uri=str(uri))
        run_id = record.get("run_id") if record.get("uri") in (None, str(uri)) else None
        run = _existing_run(client, str(run_id)) if run_id else None
        if run is not None:
            client.update_run(run.info.run_id, status="RUNNING")
        else:
            name = str(settings.get("experiment") or DEFAULT_EXPERIMENT)
            experiment = client.get_experiment_by_name(name)
            experiment_id = experiment.experiment_id if experiment is not None else client.create_experiment(name)
            run = client.create_run(experiment_id, run_name=ctx.run_name,
                                    tags={"yolotui.run_dir": str(ctx.run_dir), "mlflow.source.name": "yolotui"})
            ctx.record(self.name, run_id=run.info.run_id, uri=str(uri), experiment=name)
        self.client, self.run_id = client, run.info.run_id
        logged = dict(run.data.params or {})
        new, changed = [], []
        for key, value in ctx.params().items():
            key = key[:PARAM_KEY_CHARS]
            text = str(value)
            if key not in logged:
                new.append(Param(key, text))
            elif logged[key] != text:
                changed.append(RunTag(f"yolotui.changed.{key}"[:PARAM_KEY_CHARS], text))
        for i in range(0, len(new), MAX_PARAMS_PER_CALL):
            client.log_batch(self.run_id, params=new[i:i + MAX_PARAMS_PER_CALL])
        if changed:
            client.log_batch(self.run_id, tags=changed)
        return {int(m.step) for m in client.get_metric_history(self.run_id, STEP_KEY)}

    def log_epoch(self, epoch: int, event: dict[str, Any]) -> None:
        """The epoch's metrics at step = epoch."""
        from mlflow.entities import Metric

        stamp = int(float(event.get("ts") or time.time()) * 1000)
        metrics = [Metric(key, value, stamp, int(epoch)) for key, value in remote_scalars(event).items()]
        self.client.log_batch(self.run_id, metrics=metrics)

    def finish(self, outcome: str, artefacts: list[Path]) -> None:
        """Checkpoints as artefacts (weights/) when finished; the run's status from the outcome."""
        if outcome == FINISHED:
            for path in artefacts:
                if Path(path).is_file():
                    self.client.log_artifact(self.run_id, str(path), "weights")
        status = {FINISHED: "FINISHED", FAILED: "FAILED"}.get(outcome, "KILLED")
        self.client.set_terminated(self.run_id, status)


def _existing_run(client: Any, run_id: str) -> Any:
    """The recorded MLflow run, or None when the store no longer has it (deleted); other errors propagate
    (an unreachable server is retried at the next epoch, never answered with a second run)."""
    from mlflow.exceptions import MlflowException

    try:
        run = client.get_run(run_id)
    except MlflowException as exc:
        if getattr(exc, "error_code", "") == "RESOURCE_DOES_NOT_EXIST":
            return None
        raise
    return None if run.info.lifecycle_stage == "deleted" else run
