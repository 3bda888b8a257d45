"""--precision: which autocast dtype a device trains under, and that a CPU step under it keeps float32 state."""

from __future__ import annotations

import pytest
import torch

from yolotui.config import default_options, validate_options
from yolotui.engine.train import precision
from yolotui.errors import UserError


def test_fp32_turns_autocast_off_everywhere():
    assert precision.autocast_dtype(torch.device("cpu"), "fp32") is None
    assert precision.autocast_dtype(torch.device("cuda"), "fp32") is None


def test_auto_is_fp16_on_cuda_and_bf16_only_on_cpus_that_have_it(monkeypatch):
    assert precision.autocast_dtype(torch.device("cuda"), "auto") is torch.float16
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: True)
    assert precision.autocast_dtype(torch.device("cpu"), "auto") is torch.bfloat16
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: False)
    assert precision.autocast_dtype(torch.device("cpu"), "auto") is None
    assert precision.describe(None) == "fp32" and precision.describe(torch.bfloat16) == "bf16 autocast"


def test_to_float32_walks_nested_head_outputs():
    tree = [torch.zeros(2, dtype=torch.bfloat16), (torch.ones(1, dtype=torch.float16), torch.zeros(1, dtype=torch.long))]
    out = precision.to_float32(tree)
    assert out[0].dtype == torch.float32 and out[1][0].dtype == torch.float32 and out[1][1].dtype == torch.long
    assert isinstance(out, list) and isinstance(out[1], tuple)


def test_unknown_precision_is_refused_naming_the_flag(tmp_path):
    from yolotui.datasets import make_demo_dataset

    data = make_demo_dataset(tmp_path / "data", n_train=2, n_val=1, img=64)
    with pytest.raises(UserError, match="--precision fp8"):
        validate_options(default_options(cfg="gelan-t", data=str(data), precision="fp8"))


@pytest.mark.parametrize("choice", ["auto", "fp32"])
def test_a_cpu_training_step_under_each_precision_keeps_float32_weights_and_loss(tmp_path, choice, monkeypatch):
    from tests.trainkit import make_run
    from yolotui.engine.train.trainer import Trainer

    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: True)  # bf16 autocast also runs where emulated
    run_dir = make_run(tmp_path, precision=choice)
    trainer = Trainer(run_dir)
    trainer.setup()
    assert trainer.amp_dtype is (torch.bfloat16 if choice == "auto" else None)
    batch = next(iter(trainer_loader(trainer)))
    items = trainer._train_step(batch, ni=0)
    assert items.dtype == torch.float32 and torch.isfinite(items).all()
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters())
    assert all(p.grad is None or p.grad.dtype == torch.float32 for p in trainer.model.parameters())


def trainer_loader(trainer):
    """One epoch's training loader of `trainer` (as its epoch loop builds it)."""
    from yolotui.engine.data import pipeline

    return pipeline.epoch_loader(trainer.train_set, trainer.opt, trainer.rank_batch, 0, 0, mosaic=True)
