"""Extend a finished run (3 -> 5 epochs), fine-tune to another class count with the backbone frozen."""

from __future__ import annotations

import pytest
import torch
import yaml
from trainkit import load, make_data, make_run

from yolotui.engine.train.trainer import EngineOverrides, Trainer
from yolotui.runs.events import read_events
from yolotui.runs.results import read_rows


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _train(run_dir, **overrides):
    trainer = Trainer(run_dir, EngineOverrides(**overrides))
    trainer.setup()
    assert trainer.train() == 0
    return trainer


def test_extend_finished_run_from_3_to_5_epochs(tmp_path):
    data = make_data(tmp_path / "data", n_train=4, n_val=2, img=64)
    run_dir = make_run(tmp_path, "ext", data=data, epochs=3, batch_size=4)
    _train(run_dir)
    assert load(run_dir / "weights" / "last.pt")["epoch"] == 3
    trainer = _train(run_dir)  # nothing left: a finished run is not trained again without --epochs
    assert trainer.start_epoch == 3 and len(read_rows(run_dir / "results.csv")) == 3
    trainer = _train(run_dir, epochs=5)
    assert trainer.plan.epochs == 5  # schedule re-planned for the new total
    rows = read_rows(run_dir / "results.csv")
    assert [int(r["epoch"]) for r in rows] == [0, 1, 2, 3, 4]
    last = load(run_dir / "weights" / "last.pt")
    assert (last["epoch"], last["epochs"]) == (5, 5)
    lr_factor_epoch2 = (1 - 2 / 5) * (1 - 0.01) + 0.01  # epoch 3 trains at epoch 2's factor, as officially
    assert rows[3]["x/lr1"] == pytest.approx(0.01 * lr_factor_epoch2, rel=1e-3)
    epochs = [e["epoch"] for e in read_events(run_dir / "events.jsonl") if e["type"] == "epoch"]
    assert epochs == [0, 1, 2, 3, 4]


def test_finetune_to_other_class_count_keeps_backbone(tmp_path):
    data = make_data(tmp_path / "data", n_train=4, n_val=2, img=64)
    source = make_run(tmp_path, "src", data=data, epochs=1, batch_size=4)
    _train(source)
    other = yaml.safe_load(data.read_text())
    other["names"] = [f"c{i}" for i in range(7)]
    other.pop("nc", None)
    other_yaml = data.parent / "seven.yaml"
    other_yaml.write_text(yaml.safe_dump(other))

    run_dir = make_run(tmp_path, "ft", data=other_yaml, cfg="", weights=str(source / "weights" / "last.pt"),
                       epochs=2, batch_size=4, freeze=["backbone"], hyp={"warmup_epochs": 3.0})
    trainer = _train(run_dir)
    note = trainer.transfer_note
    assert note["source_nc"] == 5 and note["reinitialised"]
    assert all(".cv3." in key for key in note["reinitialised"])  # only the classification branch's outputs
    assert trainer.frozen > 0

    src, tuned = load(source / "weights" / "last.pt"), load(run_dir / "weights" / "last.pt")
    assert tuned["nc"] == 7
    backbone = [k for k in tuned["model"] if int(k.split(".")[1]) < 5 and "running" not in k
                and "num_batches" not in k]
    assert backbone
    for key in backbone:
        assert torch.equal(tuned["model"][key], src["ema"][key]), key
    head = [k for k in tuned["model"] if k.startswith("model.5.cv2") and k.endswith("weight")]
    assert any(not torch.equal(tuned["model"][k], src["ema"][k]) for k in head)  # the head did train


def test_frozen_layers_stay_bit_identical_weights_batchnorm_and_ema(tmp_path):
    """`--freeze` keeps the frozen layers' weights AND BatchNorm statistics, in the model and its EMA."""
    data = make_data(tmp_path / "data", n_train=4, n_val=2, img=64)
    source = make_run(tmp_path, "src", data=data, epochs=1, batch_size=4)
    _train(source)
    run_dir = make_run(tmp_path, "ft", data=data, cfg="", weights=str(source / "weights" / "last.pt"),
                       epochs=2, batch_size=2, freeze=["2"], hyp={"warmup_epochs": 0.0})
    trainer = _train(run_dir)
    assert trainer.frozen > 0 and trainer.freeze_prefixes == ("model.0.", "model.1.")
    src, tuned = load(source / "weights" / "last.pt"), load(run_dir / "weights" / "last.pt")
    frozen = [k for k in tuned["model"] if k.startswith(("model.0.", "model.1."))]
    assert any("running_var" in k for k in frozen) and any("num_batches_tracked" in k for k in frozen)
    for part in ("model", "ema"):
        for key in frozen:
            assert torch.equal(tuned[part][key], src["ema"][key]), f"{part}.{key} changed"
    free_stats = [k for k in tuned["model"] if k.startswith("model.2.") and "running_mean" in k]
    assert any(not torch.equal(tuned["model"][k], src["ema"][k]) for k in free_stats)  # the rest did train
