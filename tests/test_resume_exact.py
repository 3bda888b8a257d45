"""Exact resume: a run killed (SIGKILL, SIGTERM, twice) and resumed ends bit-identical to one never stopped.

Each trainer subprocess pays the torch + torchvision import (~10 s on a loaded 2-core machine), so the SIGTERM and
killed-twice variants are marked slow; the SIGKILL one runs by default.
"""

from __future__ import annotations

import random
import signal

import pytest
from trainkit import (
    assert_same_weights,
    kill_after_mid_epoch_checkpoint,
    load,
    make_data,
    make_run,
    run_trainer,
    start_trainer,
)

from yolotui.engine.train.checkpoint import manifest_matches
from yolotui.runs.events import read_events
from yolotui.runs.results import read_rows

# 8 images, batch 2: 4 batches an epoch; warmup ramps accumulation 1 -> 2 so gradients are pending at some
# checkpoints; a last.pt after every batch (save-period-min of a few microseconds).
RUN = {"epochs": 2, "batch_size": 2, "save_period_min": 1e-7}
HYP = {"warmup_epochs": 3.0}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_data(tmp_path_factory.mktemp("data"), n_train=8, n_val=2, img=64)


@pytest.fixture(scope="module")
def reference(tmp_path_factory, data):
    run_dir = make_run(tmp_path_factory.mktemp("ref"), "ref", data=data, hyp=HYP, **RUN)
    done = run_trainer(run_dir)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return run_dir


def _check_finished_like(run_dir, reference):
    ours, theirs = load(run_dir / "weights" / "last.pt"), load(reference / "weights" / "last.pt")
    assert_same_weights(ours, theirs)
    assert ours["updates"] == theirs["updates"]
    assert manifest_matches(run_dir / "weights" / "last.pt")
    rows, ref_rows = read_rows(run_dir / "results.csv"), read_rows(reference / "results.csv")
    assert [int(r["epoch"]) for r in rows] == [0, 1]
    assert rows == ref_rows  # same losses, metrics and lrs, no epoch counted twice
    epochs = [e["epoch"] for e in read_events(run_dir / "events.jsonl") if e["type"] == "epoch"]
    assert epochs == [0, 1]


def test_sigkill_after_mid_epoch_checkpoint_then_resume_is_exact(tmp_path, data, reference):
    run_dir = make_run(tmp_path, "killed", data=data, hyp=HYP, **RUN)
    rng = random.Random(7)
    epoch, step = rng.choice([0, 1]), rng.randint(1, 3)
    proc = start_trainer(run_dir)
    event = kill_after_mid_epoch_checkpoint(run_dir, proc, signal.SIGKILL, after_step=step, epoch=epoch)
    assert proc.returncode == -signal.SIGKILL
    assert 0 < event["step"] < 4
    resumed = run_trainer(run_dir)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "Resuming from" in resumed.stdout
    _check_finished_like(run_dir, reference)


@pytest.mark.slow
def test_sigterm_checkpoints_stops_and_resumes_exactly(tmp_path, data, reference):
    run_dir = make_run(tmp_path, "termed", data=data, hyp=HYP, **{**RUN, "save_period_min": 10.0})
    proc = start_trainer(run_dir)
    from trainkit import wait_for_event

    wait_for_event(run_dir, lambda e: e.get("type") == "batch" and e.get("epoch") == 0, proc)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 0
    events = read_events(run_dir / "events.jsonl")
    stop = [e for e in events if e["type"] == "stop"]
    assert stop and stop[-1]["reason"] == "SIGTERM"
    ckpt = load(run_dir / "weights" / "last.pt")
    assert ckpt["epoch"] == 0 and ckpt["step"] >= 1 or ckpt["epoch"] >= 1
    resumed = run_trainer(run_dir)
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    _check_finished_like(run_dir, reference)


@pytest.mark.slow
def test_killed_twice_then_resumed_is_exact(tmp_path, data, reference):
    run_dir = make_run(tmp_path, "twice", data=data, hyp=HYP, **RUN)
    proc = start_trainer(run_dir)
    kill_after_mid_epoch_checkpoint(run_dir, proc, signal.SIGKILL, after_step=2, epoch=0)
    proc = start_trainer(run_dir)
    kill_after_mid_epoch_checkpoint(run_dir, proc, signal.SIGKILL, after_step=1, epoch=1)
    resumed = run_trainer(run_dir)
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    _check_finished_like(run_dir, reference)
