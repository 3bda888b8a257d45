"""Checkpoints: weights_only loading, RNG round trip, and kills during a write (fault injection)."""

from __future__ import annotations

import random
import signal

import numpy as np
import pytest
import torch
from trainkit import load, make_data, make_run, run_trainer

from yolotui.engine.train.checkpoint import (
    manifest_matches,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from yolotui.runs.atomic import read_json


def test_rng_state_round_trips_and_loads_weights_only(tmp_path):
    torch.manual_seed(3)
    np.random.seed(3)
    random.seed(3)
    path = tmp_path / "x.pt"
    save_checkpoint({"epoch": 1, "step": 2, "epochs": 3, "rng": rng_state()}, path)
    expected = (torch.rand(3), np.random.rand(3), random.random())
    set_rng_state(load(path)["rng"])
    assert torch.equal(torch.rand(3), expected[0])
    assert np.array_equal(np.random.rand(3), expected[1]) and random.random() == expected[2]
    manifest = read_json(tmp_path / "x.pt.json")
    assert (manifest["epoch"], manifest["step"], manifest["epochs"]) == (1, 2, 3) and manifest_matches(path)


@pytest.mark.parametrize("point", ["mid-write", pytest.param("before-replace", marks=pytest.mark.slow)])
def test_kill_while_writing_leaves_loadable_last_pt(tmp_path, point):
    data = make_data(tmp_path / "data", n_train=4, n_val=2, img=64)
    run_dir = make_run(tmp_path, "fault", data=data, epochs=2, batch_size=2, save_period_min=1e-7)
    # The first checkpoint write succeeds; the second is killed at `point`.
    done = run_trainer(run_dir, YOLOTUI_CHECKPOINT_FAULT=point, YOLOTUI_CHECKPOINT_FAULT_AFTER="1")
    assert done.returncode == -signal.SIGKILL, done.stdout[-2000:] + done.stderr[-2000:]
    last = run_dir / "weights" / "last.pt"
    ckpt = load(last)
    assert manifest_matches(last)
    assert (ckpt["epoch"], ckpt["step"]) == (0, 1)  # the first write, intact
    leftovers = list((run_dir / "weights").glob(".*.tmp"))
    assert leftovers  # the killed write's temp file, never renamed into place
    resumed = run_trainer(run_dir)  # cleans the temp file and finishes from the intact checkpoint
    assert resumed.returncode == 0, resumed.stdout[-2000:]
    assert not list((run_dir / "weights").glob(".*.tmp"))
    assert load(last)["epoch"] == 2 and manifest_matches(last)
