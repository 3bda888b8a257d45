"""Training engine: loss falls on tiny data, outputs (results.csv, events, checkpoints) follow the contract."""

from __future__ import annotations

import json

import pytest
import torch
from trainkit import TINY_CFG, load, make_data, make_run

from yolotui.engine.train.checkpoint import manifest_matches
from yolotui.runs.results import HEADER, read_rows


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_a_few_steps_reduce_the_loss_by_30_percent(tmp_path):
    from yolotui.engine.data.dataset import YoloDataset
    from yolotui.engine.data.loader import collate_batch
    from yolotui.engine.data.pipeline import load_data
    from yolotui.engine.loss.yolo_loss import loss_for_model
    from yolotui.engine.model import build_model
    from yolotui.engine.train.optim import build_optimizer

    torch.manual_seed(0)
    data = load_data({"data": str(make_data(tmp_path, n_train=4, n_val=2, img=128)), "min_items": 0})
    model = build_model(TINY_CFG, nc=data.nc)
    hyp = {"box": 7.5, "cls": 0.5, "dfl": 1.5}
    loss_fn = loss_for_model(model, hyp, 0.0)
    dataset = YoloDataset(data.train, imgsz=128, augment=False)
    batch = collate_batch([dataset[i] for i in range(len(dataset))])
    imgs = batch["img"].float() / 255
    optimizer = build_optimizer(model, "SGD", 0.01, 0.937, 0.0)
    model.train()
    losses = []
    for _ in range(16):
        loss, _items = loss_fn(model(imgs), batch["targets"])
        losses.append(float(loss.detach()))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        optimizer.step()
    assert losses[-1] <= 0.7 * losses[0], losses


def test_optimizer_groups_and_nominal_batch():
    from yolotui.engine.model import build_model
    from yolotui.engine.train.optim import (
        accumulation_steps,
        build_optimizer,
        parameter_groups,
        scaled_weight_decay,
    )

    model = build_model(TINY_CFG, nc=5)
    biases, decayed, undecayed = parameter_groups(model)
    assert len(biases) + len(decayed) + len(undecayed) == len(list(model.parameters()))
    assert all(p.dim() == 1 for p in biases) and all(p.dim() == 4 for p in decayed)
    opt = build_optimizer(model, "SGD", 0.01, 0.937, 0.0005)
    assert opt.defaults["nesterov"] and [g["weight_decay"] for g in opt.param_groups] == [0.0, 0.0005, 0.0]
    assert accumulation_steps(16) == 4 and accumulation_steps(128) == 1
    assert scaled_weight_decay(0.0005, 16) == pytest.approx(0.0005)
    assert scaled_weight_decay(0.0005, 24) == pytest.approx(0.0005 * 24 * 3 / 64)


def test_schedules_and_warmup():
    from yolotui.engine.train.schedule import LrPlan

    plan = LrPlan("linear", 0.01, 10, 100, 0.1, 0.8, 0.937)
    assert plan.factor(0) == 1.0 and plan.factor(10) == pytest.approx(0.01)
    cos = LrPlan("cos", 0.01, 10, 0, 0.1, 0.8, 0.937)
    assert cos.factor(5) == pytest.approx(0.505)
    flat = LrPlan("flat_cos", 0.01, 10, 0, 0.1, 0.8, 0.937)
    assert flat.factor(4) == 1.0 and flat.factor(10) == pytest.approx(0.01)
    assert LrPlan("fixed", 0.01, 10, 0, 0.1, 0.8, 0.937).factor(9) == 1.0
    extended = plan.extended(20)
    assert extended.factor(10) == pytest.approx((1 - 10 / 20) * 0.99 + 0.01)

    class FakeOptimizer:
        param_groups = [{"lr": 0, "momentum": 0}, {"lr": 0, "momentum": 0}]

    fake = FakeOptimizer()
    plan.apply(fake, 0, 0, 0.01)
    assert fake.param_groups[0]["lr"] == pytest.approx(0.1) and fake.param_groups[1]["lr"] == 0.0
    assert fake.param_groups[0]["momentum"] == pytest.approx(0.8)
    plan.apply(fake, 0, 100, 0.01)
    assert fake.param_groups[0]["lr"] == pytest.approx(0.01) and fake.param_groups[1]["momentum"] == 0.937


def test_lr_after_warmup_lags_one_epoch_as_officially():
    """The official trainer steps its LambdaLR after `last_epoch` was set back by one: epoch e trains at epoch
    e-1's factor, except epoch 0 and the epoch in which warmup ends (recorded from its results.csv, lr columns)."""
    from yolotui.engine.train.schedule import LrPlan

    class FakeOptimizer:
        param_groups = [{"lr": 0, "momentum": 0}, {"lr": 0, "momentum": 0}]

    plan, fake, batches = LrPlan("linear", 0.01, 30, 100, 0.1, 0.8, 0.937), FakeOptimizer(), 8
    seen = {}
    for epoch in (11, 12, 13, 14, 29):
        plan.apply(fake, epoch, epoch * batches + batches - 1, 0.01, epoch * batches)
        seen[epoch] = round(fake.param_groups[1]["lr"], 5)
    # the official gelan-t run with hyp.scratch-high, 8 batches per epoch, 30 epochs, logged these lrs
    assert seen == {11: 0.00605, 12: 0.00604, 13: 0.00604, 14: 0.00571, 29: 0.00076}
    no_warmup = LrPlan("linear", 0.01, 10, 0, 0.1, 0.8, 0.937)
    no_warmup.apply(fake, 0, 0, 0.01, 0)
    assert fake.param_groups[1]["lr"] == pytest.approx(0.01)
    no_warmup.apply(fake, 1, 8, 0.01, 8)
    assert fake.param_groups[1]["lr"] == pytest.approx(0.01)  # epoch 1 still at epoch 0's factor


def test_trainer_writes_results_events_and_checkpoints(tmp_path):
    from yolotui.engine.train.trainer import Trainer

    run_dir = make_run(tmp_path, epochs=2, save_period=1)
    trainer = Trainer(run_dir)
    trainer.setup()
    assert trainer.train() == 0

    text = (run_dir / "results.csv").read_text()
    assert [c.strip() for c in text.splitlines()[0].split(",")] == list(HEADER)
    assert all(len(cell) == 20 for cell in text.splitlines()[0].split(","))
    rows = read_rows(run_dir / "results.csv")
    assert [int(r["epoch"]) for r in rows] == [0, 1]

    from runs_helpers import run_events

    events = run_events(run_dir)
    assert all({"ts", "type", "attempt"} <= e.keys() for e in events)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "done" and kinds.count("epoch") == 2
    batch = next(e for e in events if e["type"] == "batch")
    assert {"epoch", "epochs", "batch", "batches", "losses", "lr", "imgs_per_s", "gpu_mem_gb"} <= batch.keys()
    assert set(batch["losses"]) == {"box", "cls", "dfl"}
    epoch = next(e for e in events if e["type"] == "epoch")
    assert {"epoch", "epochs", "losses", "metrics", "fitness", "seconds"} <= epoch.keys()
    assert set(epoch["metrics"]) == {"P", "R", "mAP50", "mAP50-95"}
    checkpoint = next(e for e in events if e["type"] == "checkpoint")
    assert {"path", "epoch", "step", "bytes", "sha256", "seconds"} <= checkpoint.keys()
    json.dumps(events)

    weights = run_dir / "weights"
    for path in (weights / "last.pt", weights / "best.pt", weights / "epoch0.pt", weights / "epoch1.pt"):
        ckpt = load(path)
        assert manifest_matches(path)
        for key in ("format", "model_yaml", "nc", "names", "epoch", "step", "epochs", "model", "ema", "updates",
                    "optimizer", "scheduler", "scaler", "rng", "best_fitness", "opt", "hyp", "versions", "date"):
            assert key in ckpt, key
    last = load(weights / "last.pt")
    assert (last["epoch"], last["step"], last["epochs"]) == (2, 0, 2)
    assert (run_dir / "opt.yaml").exists() and (run_dir / "hyp.yaml").exists()
