"""W&B in offline mode (no network, files under the test's folder): files written, and the run id recorded in
run.yaml before the first wandb.init is the one every attempt uses across SIGKILL + resume."""

from __future__ import annotations

import pytest
from trackerkit import interrupt_mid_epoch, run_yaml, write_run_yaml
from trainkit import make_data, make_run, run_trainer

from yolotui.runs.events import read_events


@pytest.fixture(autouse=True)
def offline(tmp_path, monkeypatch):
    for name in ("WANDB_API_KEY", "WANDB_ENTITY", "WANDB_PROJECT", "WANDB_RUN_ID", "WANDB_RESUME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    for name, sub in (("WANDB_DIR", "wandb-dir"), ("WANDB_CACHE_DIR", "wandb-cache"),
                      ("WANDB_CONFIG_DIR", "wandb-config"), ("WANDB_DATA_DIR", "wandb-data")):
        (tmp_path / sub).mkdir()
        monkeypatch.setenv(name, str(tmp_path / sub))
    monkeypatch.setenv("WANDB_SILENT", "true")


def test_offline_run_files_written_and_id_stable_across_sigkill_and_resume(tmp_path):
    data = make_data(tmp_path / "data", n_train=8, n_val=2, img=64)
    run_dir = make_run(tmp_path, "killed", data=data, epochs=2, batch_size=2)
    write_run_yaml(run_dir, {"tensorboard": False, "wandb": {"project": "yolotui-tests"}})

    def sent_first_epoch(_checkpoint):
        record = (run_yaml(run_dir).get("tracker_runs") or {}).get("wandb") or {}
        return record.get("epochs") == 1 and record

    first = interrupt_mid_epoch(run_dir, epoch=1, ready=sent_first_epoch)
    assert first["epoch"] == 1
    run_id = run_yaml(run_dir)["tracker_runs"]["wandb"]["id"]
    resumed = run_trainer(run_dir)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "Resuming from" in resumed.stdout

    record = run_yaml(run_dir)["tracker_runs"]["wandb"]
    assert record["id"] == run_id and record["project"] == "yolotui-tests"
    assert record["epochs"] == 2  # each epoch sent once: epoch 0 by the killed attempt, epoch 1 by the resumed one
    offline_runs = sorted((tmp_path / "wandb-dir" / "wandb").glob("offline-run-*"))
    assert len(offline_runs) == 2, offline_runs  # one per attempt, for `wandb sync`, both under the one id
    for folder in offline_runs:
        assert folder.name.endswith(f"-{run_id}")
        assert (folder / f"run-{run_id}.wandb").is_file()
    last = (offline_runs[-1] / f"run-{run_id}.wandb").read_bytes()
    assert b"metrics/mAP50-95" in last and b"best.pt" in last and b"last.pt" in last  # metrics and the artefact
    assert not [e for e in read_events(run_dir / "events.jsonl") if e.get("kind") == "tracker"]
