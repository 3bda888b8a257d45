"""Supervised runs that fail on purpose (YOLOTUI_FAULT) and recover, or stop, as the remedy table says."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from runs_helpers import reap_runs, wait_for  # noqa: F401 - reap_runs is an autouse fixture
from trainkit import TEST_HYP_OVERRIDES, make_data, write_tiny_cfg

from yolotui.runs.layout import ENDED_STATES
from yolotui.runs.results import read_rows
from yolotui.runs.runconfig import read_run_config
from yolotui.runs.status import effective_state, read_status


@pytest.fixture
def env(cli_env):
    return {**cli_env, "YOLOTUI_TORCH_THREADS": "1", "OMP_NUM_THREADS": "1"}


def _hyp_file(tmp_path: Path) -> Path:
    from yolotui.config import load_hyp
    from yolotui.configs import resolve_hyp

    path = tmp_path / "hyp.test.yaml"
    path.write_text(yaml.safe_dump({**load_hyp(resolve_hyp(None)), **TEST_HYP_OVERRIDES}))
    return path


def train(tmp_path, yolotui_cmd, env, *flags, fault=None, n_train=4, data=None, name="r"):
    """`yolotui train` a tiny model (1 epoch, batch 4 unless flags say otherwise); returns (run_dir, stdout)."""
    data = data or make_data(tmp_path / "data", n_train=n_train, n_val=2, img=64)
    argv = [*yolotui_cmd, "train", "--cfg", str(write_tiny_cfg(tmp_path)), "--data", str(data),
            "--hyp", str(_hyp_file(tmp_path)), "--epochs", "1", "--batch", "4", "--img", "64", "--device", "cpu",
            "--workers", "0", "--project", str(tmp_path / "runs"), "--name", name, "--restart-backoff", "0",
            *flags]
    run_env = {**env, "YOLOTUI_FAULT": fault} if fault else env
    done = subprocess.run(argv, env=run_env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return tmp_path / "runs" / name, done.stdout


def wait_ended(run_dir: Path, timeout: float = 240) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = effective_state(run_dir)
        if state in ENDED_STATES:
            return state
        time.sleep(0.3)
    raise AssertionError(f"run did not end; train.log:\n{(run_dir / 'train.log').read_text()[-3000:]}")


def events_of(run_dir: Path, kind: str) -> list[dict]:
    from runs_helpers import run_events

    return [e for e in run_events(run_dir) if e.get("type") == kind]


def test_oom_resumes_at_half_batch_with_double_accumulation(tmp_path, yolotui_cmd, env):
    run_dir, out = train(tmp_path, yolotui_cmd, env, "--batch", "8", fault="oom@step=2", n_train=16)
    assert "logout: " in out  # the launch says how the run survives logout
    assert read_run_config(run_dir)["logout"]["applied"] in ("setsid", "systemd-run-scope")
    assert wait_ended(run_dir) == "finished"
    status = read_status(run_dir)
    assert [a["attempt"] for a in status.attempts] == [1, 2]
    first, second = status.attempts
    assert first["failure_class"] == "oom" and "CUDA out of memory" in first["message"]
    assert first["settings"]["batch_size"] == [8, 4] and first["settings"]["accumulate"] == [8, 16]
    assert first["ended"] >= first["started"] and second["started"] >= first["ended"]
    assert second["command"][-4:] == ["--batch-size", "4", "--accumulate", "16"]
    assert second["failure_class"] is None and status.remedies[0]["changes"]["env"]["PYTORCH_CUDA_ALLOC_CONF"] \
        == "expandable_segments:True"
    starts = {e["attempt"]: e for e in events_of(run_dir, "start")}
    assert (starts[1]["config"]["batch_size"], starts[1]["accumulate"]) == (8, 8)
    assert (starts[2]["config"]["batch_size"], starts[2]["accumulate"]) == (4, 16)
    remedy = events_of(run_dir, "remedy")
    assert len(remedy) == 1 and remedy[0]["failure_class"] == "oom" and remedy[0]["next_attempt"] == 2
    assert len(read_rows(run_dir / "results.csv")) == 1
    from yolotui.health.report import render_text
    from yolotui.jobs.doctor import diagnose_run

    assert "launched  " in render_text(diagnose_run(run_dir, environment=False))  # what `yolotui doctor` prints


def test_comm_error_retries_after_the_backoff(tmp_path, yolotui_cmd, env):
    run_dir, _ = train(tmp_path, yolotui_cmd, env, "--restart-backoff", "1.5", fault="comm@step=1")
    assert wait_ended(run_dir) == "finished"
    status = read_status(run_dir)
    first, second = status.attempts
    assert first["failure_class"] == "comm" and "ConnectionResetError" in first["message"]
    assert second["started"] - first["ended"] >= 1.5
    assert "after 1.5 s backoff" in first["remedy"]
    changed = first["changes"]["env"]
    assert changed["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1" and changed["TORCH_NCCL_BLOCKING_WAIT"] == "1"
    assert float(changed["YOLOTUI_DDP_TIMEOUT_MIN"]) > 0


def test_nan_resumes_from_the_last_finite_checkpoint_at_half_the_lr(tmp_path, yolotui_cmd, env):
    # 2 batches an epoch; the loss turns NaN from batch 4 (epoch 2) on; after 3 non-finite steps the run
    # is declared diverged. The epoch-2 checkpoint (taken after one NaN step) must not replace last.pt.
    run_dir, _ = train(tmp_path, yolotui_cmd, env, "--epochs", "3", "--fixed-lr", fault="nan@step=4", n_train=8)
    assert wait_ended(run_dir) == "finished"
    status = read_status(run_dir)
    first, second = status.attempts
    assert first["failure_class"] == "nan" and "not finite for 3 consecutive steps" in first["message"]
    assert first["settings"]["lr_scale"] == [1.0, 0.5] and "--lr-scale" in second["command"]
    assert any(e.get("kind") == "nan" for e in events_of(run_dir, "warning"))
    resumed = [e for e in events_of(run_dir, "start") if e["attempt"] == 2][0]
    assert resumed["resumed_from"]["epoch"] == 1 and resumed["resumed_from"]["step"] == 0
    assert resumed["lr_scale"] == 0.5
    lr = {e["attempt"]: e["lr"] for e in events_of(run_dir, "batch")}
    assert math.isclose(lr[2], lr[1] / 2, rel_tol=1e-9)
    rows = read_rows(run_dir / "results.csv")
    assert len(rows) == 3


def test_bad_labels_found_at_run_time_fail_without_retry(tmp_path, yolotui_cmd, env):
    data = make_data(tmp_path / "data", n_train=2, n_val=2, img=64)
    for label in sorted((tmp_path / "data").rglob("labels/train/*.txt")):
        label.write_text("0 0.5 0.5 0.2 0.2\n3 0.5 0.5 abc 0.1\n")
    run_dir, _ = train(tmp_path, yolotui_cmd, env, data=data)
    assert wait_ended(run_dir) == "failed"
    status = read_status(run_dir)
    assert len(status.attempts) == 1 and status.failure_class == "data"
    assert ".txt" in status.message and "line 2" in status.message
    assert "not retried" in status.attempts[0]["remedy"]


def test_a_run_crashing_every_time_fails_after_exactly_n_attempts(tmp_path, yolotui_cmd, env):
    run_dir, _ = train(tmp_path, yolotui_cmd, env, "--max-restarts", "1", fault="crash@step=2:always", n_train=8)
    assert wait_ended(run_dir) == "failed"
    status = read_status(run_dir)
    assert [a["attempt"] for a in status.attempts] == [1, 2]
    assert all(a["failure_class"] == "crash" and "RuntimeError: crash injected" in a["message"]
               for a in status.attempts)
    assert "attempt limit reached (2)" in status.attempts[-1]["remedy"]
    assert status.failure_class == "crash" and status.max_attempts == 2
    assert len(events_of(run_dir, "remedy")) == 2


SLEEPER = ("import os, sys, time; open(sys.argv[1], 'a').write(os.environ['YOLOTUI_ATTEMPT'] + '\\n'); "
           "time.sleep(120)")


def test_resume_interrupted_after_supervisors_are_killed(tmp_path, yolotui_cmd, cli_env):
    runs = []
    for name in ("one", "two"):
        marker = tmp_path / f"{name}.starts"
        done = subprocess.run([*yolotui_cmd, "exec", "--name", name, "--project", str(tmp_path / "runs"), "--",
                               sys.executable, "-c", SLEEPER, str(marker)], env=cli_env, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        runs.append((tmp_path / "runs" / name, marker))
    supervisors = []
    for run_dir, marker in runs:
        wait_for(lambda m=marker: m.exists() and m.read_text().count("\n") == 1, timeout=30)
        supervisors.append(read_status(run_dir).supervisor_pid)
    for pid in supervisors:
        os.kill(pid, signal.SIGKILL)
    for run_dir, _ in runs:
        wait_for(lambda r=run_dir: effective_state(r) == "interrupted", timeout=30)
        assert read_status(run_dir).state == "running"  # what status.json still says

    resumed = subprocess.run([*yolotui_cmd, "resume", "--interrupted"], env=cli_env, capture_output=True, text=True,
                             timeout=60)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    for run_dir, marker in runs:
        assert f"resumed {run_dir.name}" in resumed.stdout
        wait_for(lambda m=marker: m.read_text().count("\n") == 2, timeout=30)
        status = read_status(run_dir)
        assert effective_state(run_dir) == "running" and status.supervisor_pid not in supervisors
        assert read_run_config(run_dir)["resumed_after_interrupt"]["previous_state"] == "running"
    again = subprocess.run([*yolotui_cmd, "resume", "--interrupted"], env=cli_env, capture_output=True, text=True,
                           timeout=60)
    assert again.returncode == 0 and "no interrupted runs" in again.stdout
    for run_dir, _ in runs:
        subprocess.run([*yolotui_cmd, "stop", str(run_dir), "--force"], env=cli_env, capture_output=True, timeout=60)
        assert wait_ended(run_dir, timeout=30) == "stopped"
    assert json.loads((runs[0][0] / "status.json").read_text())["state"] == "stopped"


@pytest.mark.slow
def test_a_remedied_training_run_resumes_after_its_supervisor_is_killed(tmp_path, yolotui_cmd, env):
    """oom at batch 8 -> attempt 2 at batch 4; the supervisor is SIGKILLed mid-run; resume --interrupted
    continues from last.pt at batch 4 and the run finishes with every epoch counted once."""
    run_dir, _ = train(tmp_path, yolotui_cmd, env, "--batch", "8", "--epochs", "2", "--save-period-min", "1e-7",
                       fault="oom@step=1", n_train=16)
    wait_for(lambda: any(e["attempt"] == 2 and e.get("step", 0) > 0 for e in events_of(run_dir, "checkpoint")),
             timeout=240, interval=0.2)
    os.kill(read_status(run_dir).supervisor_pid, signal.SIGKILL)  # the trainer gets SIGTERM, saves, exits
    wait_for(lambda: effective_state(run_dir) == "interrupted", timeout=60)
    resumed = subprocess.run([*yolotui_cmd, "resume", "--interrupted"], env=env, capture_output=True, text=True,
                             timeout=60)
    assert resumed.returncode == 0 and f"resumed {run_dir.name}" in resumed.stdout, resumed.stdout + resumed.stderr
    assert wait_ended(run_dir) == "finished"
    status = read_status(run_dir)
    assert status.attempts[0]["command"][-4:] == ["--batch-size", "4", "--accumulate", "16"]
    last_start = events_of(run_dir, "start")[-1]
    assert last_start["config"]["batch_size"] == 4 and last_start["resumed_from"] is not None
    assert len(read_rows(run_dir / "results.csv")) == 2
