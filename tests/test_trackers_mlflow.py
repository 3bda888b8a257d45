"""MLflow against a local file store: the run id recorded in run.yaml survives SIGKILL + resume (one MLflow run,
every epoch once, params, the checkpoints as artefacts); an unreachable server never stops training (warning
events, retried each epoch, counted in `yolotui status`); `yolotui train --mlflow` through the launcher, a crash
restarted by the supervisor, then `resume --epochs` (extend): still the one MLflow run."""

from __future__ import annotations

import subprocess

import pytest
import yaml
from trackerkit import interrupt_mid_epoch, run_yaml, wait_until, write_run_yaml
from trainkit import TEST_HYP_OVERRIDES, make_data, make_run, run_trainer, write_tiny_cfg

from yolotui.config import load_hyp
from yolotui.configs import resolve_hyp
from yolotui.runs.events import read_events

RUN = {"epochs": 2, "batch_size": 2}


@pytest.fixture(autouse=True)
def file_store(monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 refuses file stores without it
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_data(tmp_path_factory.mktemp("data"), n_train=8, n_val=2, img=64)


def _client(uri):
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _runs(uri):
    client = _client(uri)
    experiment = client.get_experiment_by_name("yolotui")
    return client.search_runs([experiment.experiment_id]) if experiment is not None else []


def test_run_id_survives_sigkill_and_resume_one_mlflow_run_all_epochs(tmp_path, data):
    uri = f"file:{tmp_path / 'mlruns'}"
    run_dir = make_run(tmp_path, "killed", data=data, **RUN)
    write_run_yaml(run_dir, {"tensorboard": False, "mlflow": {"uri": uri, "experiment": "yolotui"}})

    def recorded(_checkpoint):
        return ((run_yaml(run_dir).get("tracker_runs") or {}).get("mlflow") or {}).get("run_id")

    interrupt_mid_epoch(run_dir, epoch=1, ready=recorded)
    first_id = recorded(None)
    resumed = run_trainer(run_dir)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "Resuming from" in resumed.stdout

    runs = _runs(uri)
    assert [r.info.run_id for r in runs] == [first_id]
    assert recorded(None) == first_id
    client = _client(uri)
    for key in ("fitness", "metrics/mAP50-95", "metrics/precision", "train/box_loss", "lr/pg0"):
        assert sorted(m.step for m in client.get_metric_history(first_id, key)) == [0, 1], key
    run = client.get_run(first_id)
    assert run.info.status == "FINISHED"
    assert run.data.params["epochs"] == "2" and "lr0" in run.data.params
    assert sorted(a.path for a in client.list_artifacts(first_id, "weights")) == ["weights/best.pt", "weights/last.pt"]
    assert not list(run_dir.glob("events.out.tfevents.*"))  # tensorboard: false
    assert not [e for e in read_events(run_dir / "events.jsonl") if e.get("kind") == "tracker"]


def test_an_unreachable_server_never_stops_training_and_is_retried_each_epoch(tmp_path, data, capsys):
    run_dir = make_run(tmp_path, "down", data=data, epochs=3, batch_size=4)
    write_run_yaml(run_dir, {"tensorboard": False, "mlflow": {"uri": "http://127.0.0.1:9", "experiment": "x"}})
    done = run_trainer(run_dir, MLFLOW_HTTP_REQUEST_MAX_RETRIES="0", MLFLOW_HTTP_REQUEST_TIMEOUT="2")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    events = read_events(run_dir / "events.jsonl")
    assert [e["epoch"] for e in events if e["type"] == "epoch"] == [0, 1, 2]
    assert [e["type"] for e in events if e["type"] not in ("warning", "batch", "checkpoint", "epoch")] == ["start", "done"]
    warnings = [e for e in events if e["type"] == "warning" and e.get("kind") == "tracker"]
    assert len(warnings) >= 4  # the open, a retry at each of the 3 epochs (and one last try at the end)
    assert all(w["tracker"] == "mlflow" and w["message"].startswith("mlflow: ") for w in warnings)
    record = run_yaml(run_dir)["tracker_runs"]["mlflow"]
    assert record["failures"] == len(warnings) and record["ok"] is False

    from yolotui.cli import main

    assert main(["status", str(run_dir)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("trackers   mlflow: "))
    assert f"{len(warnings)} failures, failing" in line and "127.0.0.1:9" in line


def _wait_ended(run_dir, timeout=150):
    from yolotui.runs.layout import ENDED_STATES
    from yolotui.runs.status import effective_state

    return wait_until(lambda: effective_state(run_dir) in ENDED_STATES and effective_state(run_dir), timeout,
                      f"{run_dir} to end")


def test_train_with_mlflow_a_restart_then_an_extend_is_one_mlflow_run(tmp_path, data, yolotui_cmd, cli_env):
    hyp = tmp_path / "hyp.yaml"
    hyp.write_text(yaml.safe_dump({**load_hyp(resolve_hyp(None)), **TEST_HYP_OVERRIDES}))
    env = {**cli_env, "YOLOTUI_TORCH_THREADS": "1", "OMP_NUM_THREADS": "1", "MLFLOW_ALLOW_FILE_STORE": "true"}
    run_dir = tmp_path / "runs" / "e2e"
    # 8 images, batch 4: 2 batches an epoch; attempt 1 crashes at its 3rd batch (in epoch 1), the supervisor
    # restarts it from the epoch-0 checkpoint (attempt 2), then `resume --epochs 3` extends the finished run.
    started = subprocess.run([*yolotui_cmd, "train", "--cfg", str(write_tiny_cfg(tmp_path)), "--data", str(data),
                              "--hyp", str(hyp), "--epochs", "2", "--batch", "4", "--img", "64", "--device", "cpu",
                              "--workers", "0", "--project", str(tmp_path / "runs"), "--name", "e2e",
                              "--restart-backoff", "0", "--mlflow", "--no-tensorboard"],
                             env={**env, "YOLOTUI_FAULT": "crash@step=3"}, capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stderr
    assert _wait_ended(run_dir) == "finished", (run_dir / "train.log").read_text()[-3000:]
    from yolotui.runs.status import read_status

    assert read_status(run_dir).attempt == 2  # the crash was restarted by the supervisor
    config = run_yaml(run_dir)
    assert config["trackers"]["tensorboard"] is False and config["trackers"]["mlflow"]["uri"] is None
    first_id = config["tracker_runs"]["mlflow"]["run_id"]
    uri = config["tracker_runs"]["mlflow"]["uri"]
    assert uri == f"file:{tmp_path.resolve() / 'runs' / 'mlruns'}"  # the default store, beside the run folders

    extended = subprocess.run([*yolotui_cmd, "resume", str(run_dir), "--epochs", "3"], env=env, capture_output=True,
                              text=True, timeout=120)
    assert extended.returncode == 0, extended.stderr
    assert _wait_ended(run_dir) == "finished", (run_dir / "train.log").read_text()[-3000:]
    config = run_yaml(run_dir)
    assert config["trackers"]["tensorboard"] is False  # carried over by the resume
    assert config["tracker_runs"]["mlflow"]["run_id"] == first_id
    assert [r.info.run_id for r in _runs(uri)] == [first_id]
    client = _client(uri)
    assert sorted(m.step for m in client.get_metric_history(first_id, "fitness")) == [0, 1, 2]
    assert client.get_run(first_id).data.tags.get("yolotui.changed.epochs") == "3"
    assert client.get_run(first_id).info.status == "FINISHED"
