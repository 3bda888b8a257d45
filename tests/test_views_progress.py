"""The views read progress as soon as it exists: `yolotui ls` and `status --json` from events.jsonl batch and
epoch events and results.csv rows, for yolotui's own trainer and for the official backend (the stand-in)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from runs_helpers import reap_runs, wait_for  # noqa: F401 - reap_runs is an autouse fixture
from test_recovery_runs import train, wait_ended

from yolotui.runs.events import EventWriter
from yolotui.runs.status import RunStatus, write_status
from yolotui.runs.summary import summarize

STANDIN = Path(__file__).resolve().parent / "official_standin"


def _folder(tmp_path: Path, *events: dict, rows: int | None = None) -> Path:
    run_dir = tmp_path / "r"
    run_dir.mkdir(parents=True)
    write_status(run_dir, RunStatus(name="r", run_dir=str(run_dir), state="running"))
    writer = EventWriter(run_dir / "events.jsonl", attempt=1)
    for event in events:
        writer.emit(event.pop("type"), **event)
    if rows is not None:
        header = "epoch,metrics/mAP_0.5:0.95\n"
        (run_dir / "results.csv").write_text(header + "".join(f"{i},0.1\n" for i in range(rows)))
    return run_dir


def test_progress_comes_from_batch_and_epoch_events_and_results_rows(tmp_path):
    only_events = summarize(_folder(tmp_path / "a", {"type": "start", "epochs": 10},
                                    {"type": "batch", "epoch": 0, "epochs": 10, "batch": 7, "batches": 50}))
    assert (only_events.epoch, only_events.epochs, only_events.batch, only_events.batches) == (0, 10, 7, 50)
    assert only_events.last_event_type == "batch" and only_events.last_event_ts > time.time() - 60
    # the epoch event of epoch 3 (0-based) is there before its results.csv row is
    ahead = summarize(_folder(tmp_path / "b", {"type": "epoch", "epoch": 3, "epochs": 10}, rows=3))
    assert (ahead.epoch, ahead.batch) == (4, None)
    # an exec run with no results.csv at all, in its second epoch
    exec_like = summarize(_folder(tmp_path / "c", {"type": "epoch", "epoch": 0, "epochs": 5},
                                  {"type": "batch", "epoch": 1, "epochs": 5, "batch": 2, "batches": 9}))
    assert (exec_like.epoch, exec_like.batch, exec_like.batches) == (1, 2, 9)
    done = summarize(_folder(tmp_path / "d", {"type": "epoch", "epoch": 4, "epochs": 5}, {"type": "done"}, rows=5))
    assert (done.epoch, done.epochs, done.batch) == (5, 5, None)


def _status(yolotui_cmd, env, run_dir: Path, *flags: str):
    done = subprocess.run([*yolotui_cmd, "status", str(run_dir), *flags], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if "--json" in flags else done.stdout


def _rows(run_dir: Path) -> int:
    try:
        return max(0, len((run_dir / "results.csv").read_text().splitlines()) - 1)
    except OSError:
        return 0


def test_status_json_shows_an_engine_run_in_its_first_epoch(tmp_path, yolotui_cmd, cli_env):
    env = {**cli_env, "YOLOTUI_TORCH_THREADS": "1", "OMP_NUM_THREADS": "1", "YOLOTUI_STEP_DELAY_S": "0.4"}
    run_dir, _ = train(tmp_path, yolotui_cmd, env, "--epochs", "2", n_train=24)
    listed = subprocess.run([*yolotui_cmd, "ls", "--json"], env=env, capture_output=True, text=True, timeout=60)
    assert run_dir.name in {row["name"] for row in json.loads(listed.stdout)}  # listed from the first moment

    def first_epoch_progress():
        summary = _status(yolotui_cmd, env, run_dir, "--json")["summary"]
        return summary if summary["batch"] and summary["epoch"] == 0 and _rows(run_dir) == 0 else None

    summary = wait_for(first_epoch_progress, timeout=120, interval=0.2)
    assert summary["epochs"] == 2 and summary["batches"] == 6 and summary["last_event_type"] == "batch"
    text = _status(yolotui_cmd, env, run_dir)
    assert "last batch event" in text and "status.json" not in text
    assert "(epoch 1 of 2: batch " in text
    wait_for(lambda: _status(yolotui_cmd, env, run_dir, "--json")["summary"]["epoch"] >= 1, timeout=120,
             interval=0.2)
    assert wait_ended(run_dir) == "finished"


def test_status_json_shows_an_official_run_in_its_first_epoch(tmp_path, yolotui_cmd, cli_env):
    env = {**cli_env, "STANDIN_BATCH_S": "0.4", "STANDIN_BATCHES": "8"}
    done = subprocess.run([*yolotui_cmd, "train", "--backend", "official", "--repo", str(STANDIN), "--python",
                           sys.executable, "--epochs", "2", "--batch-size", "4", "--project", str(tmp_path / "runs"),
                           "--name", "o"], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = tmp_path / "runs" / "o"

    def first_epoch_progress():
        summary = _status(yolotui_cmd, env, run_dir, "--json")["summary"]
        return summary if summary["batch"] and summary["epoch"] == 0 and _rows(run_dir) == 0 else None

    summary = wait_for(first_epoch_progress, timeout=120, interval=0.2)
    assert summary["epochs"] == 2 and summary["batches"] == 8
    wait_for(lambda: _status(yolotui_cmd, env, run_dir, "--json")["summary"]["epoch"] >= 1, timeout=120,
             interval=0.2)
    assert wait_ended(run_dir) == "finished"
    assert _status(yolotui_cmd, env, run_dir, "--json")["summary"]["epoch"] == 2
