"""The short-run recipe (hyp.short-run.yaml): optional hyp keys `nbs` and `warmup_min_iters`, and the shipped file."""

from __future__ import annotations

import pytest

from tests.trainkit import make_run
from yolotui.config import load_hyp
from yolotui.configs import resolve_hyp
from yolotui.engine.train.schedule import make_plan

HYP = {"lrf": 0.01, "warmup_epochs": 1.0, "warmup_bias_lr": 0.1, "warmup_momentum": 0.8, "momentum": 0.937}


def test_warmup_floor_is_official_unless_the_hyp_lowers_it():
    assert make_plan({}, HYP, epochs=50, batches_per_epoch=8).warmup_iters == 100
    assert make_plan({}, {**HYP, "warmup_min_iters": 0}, epochs=50, batches_per_epoch=8).warmup_iters == 8
    assert make_plan({}, {**HYP, "warmup_min_iters": 20}, epochs=50, batches_per_epoch=8).warmup_iters == 20
    assert make_plan({}, {**HYP, "warmup_epochs": 0.0, "warmup_min_iters": 0}, 50, 8).warmup_iters == 0


@pytest.mark.parametrize(("nbs", "accumulate", "decay"), [(None, 16, 0.0005), (4, 1, 0.0005), (8, 2, 0.0005),
                                                          (2, 1, 0.001)])
def test_nominal_batch_from_hyp_sets_accumulation_and_decay(tmp_path, nbs, accumulate, decay):
    from yolotui.engine.train.trainer import Trainer

    run_dir = make_run(tmp_path, hyp={} if nbs is None else {"nbs": nbs}, batch_size=4)
    trainer = Trainer(run_dir)
    trainer.setup()
    assert trainer.accumulate == accumulate
    assert trainer.optimizer.param_groups[1]["weight_decay"] == pytest.approx(decay)


def test_shipped_demo_hyp_has_every_official_key_and_the_short_run_keys():
    demo = load_hyp(resolve_hyp("hyp.short-run.yaml"))
    official = load_hyp(resolve_hyp(None))
    assert set(official) <= set(demo)
    assert demo["nbs"] == 16 and demo["warmup_min_iters"] == 0 and demo["mixup"] == 0.0
    # the AdamW values measured in bench/bench_convergence.py (lr 0.004, beta1 0.9, no SGD-style bias warmup)
    assert (demo["lr0"], demo["momentum"], demo["warmup_bias_lr"]) == (0.004, 0.9, 0.0)
