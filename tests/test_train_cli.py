"""`yolotui train` returns at once and the run finishes under the supervisor; resume's flag rules."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import yaml
from trainkit import TEST_HYP_OVERRIDES, load, make_data, write_tiny_cfg

from yolotui.runs.layout import ENDED_STATES
from yolotui.runs.results import read_rows
from yolotui.runs.status import effective_state


def _hyp_file(tmp_path: Path) -> Path:
    from yolotui.config import load_hyp
    from yolotui.configs import resolve_hyp

    path = tmp_path / "hyp.test.yaml"
    path.write_text(yaml.safe_dump({**load_hyp(resolve_hyp(None)), **TEST_HYP_OVERRIDES}))
    return path


def _wait_ended(run_dir: Path, timeout: float = 180) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = effective_state(run_dir)
        if state in ENDED_STATES:
            return state
        time.sleep(0.3)
    raise AssertionError(f"run did not end; train.log:\n{(run_dir / 'train.log').read_text()[-3000:]}")


@pytest.fixture
def env(cli_env):
    return {**cli_env, "YOLOTUI_TORCH_THREADS": "1", "OMP_NUM_THREADS": "1"}


def _train(tmp_path, yolotui_cmd, env, *extra):
    data = make_data(tmp_path / "data", n_train=4, n_val=2, img=64)
    argv = [*yolotui_cmd, "train", "--cfg", str(write_tiny_cfg(tmp_path)), "--data", str(data),
            "--hyp", str(_hyp_file(tmp_path)), "--epochs", "1", "--batch", "4", "--img", "64", "--device", "cpu",
            "--workers", "0", "--project", str(tmp_path / "runs"), "--name", "e2e", *extra]
    started = time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    returned_after = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    run_dir = tmp_path / "runs" / "e2e"
    assert str(run_dir) in done.stdout
    return run_dir, returned_after


def test_train_returns_at_once_and_run_finishes_under_supervisor(tmp_path, yolotui_cmd, env):
    run_dir, _ = _train(tmp_path, yolotui_cmd, env)
    assert effective_state(run_dir) not in ENDED_STATES  # returned while the trainer still works
    assert _wait_ended(run_dir) == "finished"
    assert [int(r["epoch"]) for r in read_rows(run_dir / "results.csv")] == [0]
    for name in ("run.yaml", "opt.yaml", "hyp.yaml", "status.json", "events.jsonl", "train.log"):
        assert (run_dir / name).exists(), name
    assert load(run_dir / "weights" / "last.pt")["epoch"] == 1

    def cli(*args):
        return subprocess.run([*yolotui_cmd, *args], env=env, capture_output=True, text=True, timeout=60)

    finished = cli("resume", str(run_dir))
    assert finished.returncode == 2 and "extend it with --epochs" in finished.stderr
    refused = cli("resume", str(run_dir), "--img", "320")
    assert refused.returncode == 2 and "--imgsz cannot be changed on resume" in refused.stderr
    refused = cli("train", "--resume", str(run_dir), "--cfg", "yolov9-s")
    assert refused.returncode == 2 and "--cfg cannot be given with --resume" in refused.stderr


@pytest.mark.slow
def test_resume_cli_extends_a_finished_run(tmp_path, yolotui_cmd, env):
    run_dir, _ = _train(tmp_path, yolotui_cmd, env)
    assert _wait_ended(run_dir) == "finished"
    done = subprocess.run([*yolotui_cmd, "resume", str(run_dir), "--epochs", "2"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    time.sleep(1.0)
    assert _wait_ended(run_dir) == "finished"
    assert [int(r["epoch"]) for r in read_rows(run_dir / "results.csv")] == [0, 1]


@pytest.mark.slow
def test_stop_then_train_resume_without_argument(tmp_path, yolotui_cmd, env):
    """`yolotui stop` (SIGTERM to the process group, loader workers included) -> stopped; `train --resume`."""
    from runs_helpers import run_events

    from yolotui.runs.events import read_events

    run_dir, _ = _train(tmp_path, yolotui_cmd, env, "--workers", "1", "--batch", "2", "--epochs", "2")
    deadline = time.monotonic() + 120
    while not any(e.get("type") == "batch" for e in run_events(run_dir)):
        assert time.monotonic() < deadline and effective_state(run_dir) not in ENDED_STATES
        time.sleep(0.1)
    stop = subprocess.run([*yolotui_cmd, "stop", str(run_dir)], env=env, capture_output=True, text=True, timeout=90)
    assert stop.returncode == 0, stop.stderr
    assert _wait_ended(run_dir) == "stopped"
    assert any(e.get("type") == "stop" for e in read_events(run_dir / "events.jsonl"))
    ckpt = load(run_dir / "weights" / "last.pt")
    assert ckpt["epoch"] < 2
    resumed = subprocess.run([*yolotui_cmd, "train", "--resume"], env=env, capture_output=True, text=True,
                             timeout=120)
    assert resumed.returncode == 0 and str(run_dir) in resumed.stdout, resumed.stderr
    time.sleep(1.0)
    assert _wait_ended(run_dir) == "finished"
    assert [int(r["epoch"]) for r in read_rows(run_dir / "results.csv")] == [0, 1]
