"""Names of the files in a run directory and the run states.

The contract they name: docs/architecture.md, "The run folder".
"""

from __future__ import annotations

from pathlib import Path

RUN_YAML = "run.yaml"
OPT_YAML = "opt.yaml"
HYP_YAML = "hyp.yaml"
STATUS_JSON = "status.json"
EVENTS_JSONL = "events.jsonl"  # every event but `batch`; the batch stream: yolotui.runs.events.BATCHES_FILE
RESULTS_CSV = "results.csv"
TRAIN_LOG = "train.log"
SUPERVISOR_LOG = "supervisor.log"
WEIGHTS_DIR = "weights"
LOCK_FILE = ".lock"
STOP_REQUEST = "stop.request"  # written by `yolotui stop`, read and removed by the supervisor
LAST_PT = "last.pt"
BEST_PT = "best.pt"

# States written by the supervisor into status.json.
QUEUED = "queued"
RUNNING = "running"
RESTARTING = "restarting"
STOPPING = "stopping"
FINISHED = "finished"
FAILED = "failed"
STOPPED = "stopped"
# Derived, never written: status says live but no supervisor holds the lock.
INTERRUPTED = "interrupted"

STATES = (QUEUED, RUNNING, RESTARTING, STOPPING, FINISHED, FAILED, STOPPED, INTERRUPTED)
LIVE_STATES = frozenset({QUEUED, RUNNING, RESTARTING, STOPPING})
ENDED_STATES = frozenset({FINISHED, FAILED, STOPPED, INTERRUPTED})


def weights_dir(run_dir: Path) -> Path:
    """The folder that holds a run's checkpoints."""
    return Path(run_dir) / WEIGHTS_DIR


def manifest_path(checkpoint: Path) -> Path:
    """The JSON manifest written beside a checkpoint (`last.pt` -> `last.pt.json`)."""
    checkpoint = Path(checkpoint)
    return checkpoint.with_name(checkpoint.name + ".json")
