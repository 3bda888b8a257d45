"""Multi-process training on the CPU (gloo under torchrun): trains, checkpoints, is killed, resumes, finishes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from trainkit import load, make_data, make_run, trainer_env, wait_for_event

from yolotui.backends.engine.backend import engine_command
from yolotui.engine.train.checkpoint import manifest_matches
from yolotui.runs.events import read_events
from yolotui.runs.results import read_rows


def test_multi_device_runs_under_torchrun(tmp_path):
    argv = engine_command(tmp_path, None, nproc=2)
    assert argv[:5] == [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    assert argv[5:] == ["-m", "yolotui.engine", "train", "--run-dir", str(tmp_path)]
    assert "torch.distributed.run" not in engine_command(tmp_path, None, nproc=1)


def _torchrun(run_dir):
    log = open(run_dir / "train.log", "ab")  # noqa: SIM115
    return subprocess.Popen(engine_command(run_dir, None, nproc=2), env=trainer_env(), stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


@pytest.mark.slow
def test_two_process_gloo_run_is_killed_resumes_and_finishes(tmp_path):
    data = make_data(tmp_path / "data", n_train=8, n_val=2, img=64)
    run_dir = make_run(tmp_path, "ddp", data=data, epochs=2, batch_size=4, save_period_min=1e-7,
                       hyp={"warmup_epochs": 3.0})
    proc = _torchrun(run_dir)
    wait_for_event(run_dir, lambda e: e.get("type") == "checkpoint" and e.get("epoch") == 0
                   and e.get("step", 0) >= 1, proc, timeout=240)
    os.killpg(proc.pid, signal.SIGKILL)  # the agent and both ranks
    proc.wait(timeout=60)
    start = read_events(run_dir / "events.jsonl")[0]
    assert start["type"] == "start" and start["world_size"] == 2
    assert manifest_matches(run_dir / "weights" / "last.pt")

    proc = _torchrun(run_dir)
    assert proc.wait(timeout=300) == 0, (run_dir / "train.log").read_text()[-3000:]
    assert [int(r["epoch"]) for r in read_rows(run_dir / "results.csv")] == [0, 1]
    last = load(run_dir / "weights" / "last.pt")
    assert (last["epoch"], last["epochs"]) == (2, 2)
    assert not any(k.startswith("module.") for k in last["model"])
    resumed = [e for e in read_events(run_dir / "events.jsonl") if e["type"] == "start"][-1]
    assert resumed["resumed_from"] and resumed["world_size"] == 2
