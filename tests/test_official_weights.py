"""Official YOLOv9 checkpoints are read without running code from them, and their weights transfer by name.

The "official" checkpoint is made here: a tiny yolotui model's module tree re-classed into classes of fake
`models.yolo` / `models.common` modules (as the official repository pickles its own classes), saved the way
train_dual.py saves (half precision, ema + model, numpy best_fitness, opt dict), and the fake modules are
removed from sys.modules before reading, so the reader cannot import them even if it tried.
"""

from __future__ import annotations

import copy
import os
import pickle
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from trainkit import TINY_CFG, make_data, make_run

from yolotui.backends.official.weights import load_weights_source, read_official
from yolotui.engine.model import build_model
from yolotui.engine.tools.weights import load_model_for_eval
from yolotui.engine.train.startup import transfer_weights
from yolotui.engine.train.trainer import EngineOverrides, Trainer
from yolotui.errors import UserError

FAKE_MODULES = ("models", "models.yolo", "models.common")


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _fake_class(module: types.ModuleType, name: str) -> type:
    cls = getattr(module, name, None)
    if cls is None:
        cls = type(name, (nn.Module,), {"__module__": module.__name__})
        cls.__qualname__ = name
        setattr(module, name, cls)
    return cls


def _officialize(module: nn.Module, common: types.ModuleType) -> nn.Module:
    """The same module tree, with every yolotui class swapped for a same-named class of fake models.common."""
    cls = type(module)
    new_cls = cls if cls.__module__.startswith("torch.") else _fake_class(common, cls.__name__)
    clone = object.__new__(new_cls)
    clone.__dict__.update(module.__dict__)
    clone.__dict__["_modules"] = {k: (_officialize(v, common) if v is not None else None)
                                  for k, v in module._modules.items()}
    return clone


def save_fake_official(path: Path, model: nn.Module, nc: int, with_ema: bool = True, payload=None) -> None:
    """A train_dual.py-style checkpoint of `model` whose classes live in fake official modules.

    `payload` is set as an attribute of the first layer after all copying (deepcopy would call its reduce).
    """
    package, yolo, common = (types.ModuleType(n) for n in FAKE_MODULES)
    package.yolo, package.common = yolo, common
    sys.modules.update({"models": package, "models.yolo": yolo, "models.common": common})
    try:
        detection_model = _fake_class(yolo, "DetectionModel")
        official = object.__new__(detection_model)
        nn.Module.__init__(official)
        official.model = _officialize(copy.deepcopy(model.model), common)
        official.yaml = {**copy.deepcopy(TINY_CFG), "nc": nc, "ch": 3}
        official.nc, official.names = nc, [f"class{i}" for i in range(nc)]
        official.stride = torch.tensor([8.0, 16.0, 32.0])
        official.hyp = {"lr0": 0.01}
        ckpt = {"epoch": 4, "best_fitness": np.array([0.25]), "model": copy.deepcopy(official).half(),
                "ema": copy.deepcopy(official).half() if with_ema else None, "updates": 40,
                "optimizer": None, "opt": {"epochs": 5, "save_dir": "runs/train/exp"},
                "git": {"commit": "abc"}, "date": "2024-02-21T10:00:00"}
        if payload is not None:
            ckpt["model"].model[0].payload = payload
        torch.save(ckpt, path)
    finally:
        for name in FAKE_MODULES:
            sys.modules.pop(name, None)


@pytest.fixture
def tiny_model():
    torch.manual_seed(1)
    return build_model(copy.deepcopy(TINY_CFG), nc=5)


def test_reads_the_ema_state_dict_with_official_names(tmp_path, tiny_model):
    path = tmp_path / "yolov9-tiny.pt"
    save_fake_official(path, tiny_model, nc=5)
    weights = read_official(path)
    assert not any(name in sys.modules for name in FAKE_MODULES)  # nothing was imported
    expected = tiny_model.state_dict()
    assert weights.source == "ema" and weights.model_class == "models.yolo.DetectionModel"
    assert set(weights.state) == set(expected)  # persistent buffers only: the head's stride buffer is not there
    for key, value in expected.items():
        want = value.half().float() if value.is_floating_point() else value
        assert torch.equal(weights.state[key], want), key
    assert weights.nc == 5 and weights.names == [f"class{i}" for i in range(5)]
    assert weights.yaml["backbone"] == TINY_CFG["backbone"] and weights.epoch == 4


def test_model_is_used_when_there_is_no_ema(tmp_path, tiny_model):
    path = tmp_path / "stripped.pt"
    save_fake_official(path, tiny_model, nc=5, with_ema=False)
    assert read_official(path).source == "model"


def test_all_tensors_transfer_into_a_yolotui_model(tmp_path, tiny_model):
    path = tmp_path / "w.pt"
    save_fake_official(path, tiny_model, nc=5)
    torch.manual_seed(2)
    target = build_model(copy.deepcopy(TINY_CFG), nc=5)
    done, total, skipped = transfer_weights(target, read_official(path).state)
    assert (done, skipped) == (total, [])
    assert torch.equal(target.state_dict()["model.0.conv.weight"],
                       tiny_model.state_dict()["model.0.conv.weight"].half().float())


def test_other_class_count_transfers_all_but_the_class_outputs(tmp_path, tiny_model):
    path = tmp_path / "w.pt"
    save_fake_official(path, tiny_model, nc=5)
    target = build_model(copy.deepcopy(TINY_CFG), nc=7)
    done, total, skipped = transfer_weights(target, read_official(path).state)
    assert skipped and done == total - len(skipped)
    assert all(".cv3." in key for key in skipped)  # only the classification branch's last convs


def test_trainer_fine_tunes_from_an_official_checkpoint(tmp_path, tiny_model):
    path = tmp_path / "official.pt"
    save_fake_official(path, tiny_model, nc=5)
    data = make_data(tmp_path / "data", n_train=4, n_val=2, img=64)
    run_dir = make_run(tmp_path, "ft", data=data, cfg="", weights=str(path), epochs=1, batch_size=4)
    trainer = Trainer(run_dir, EngineOverrides())
    trainer.setup()
    note = trainer.transfer_note
    assert note["official"] and note["transferred"] == note["total"] and not note["reinitialised"]
    assert trainer.train() == 0


def test_val_loads_an_official_checkpoint(tmp_path, tiny_model):
    path = tmp_path / "official.pt"
    save_fake_official(path, tiny_model, nc=5)
    model, info = load_model_for_eval(path)
    assert info["nc"] == 5 and info["names"][0] == "class0" and info["weights"] == "ema"
    assert torch.equal(model.state_dict()["model.4.cv1.conv.weight"],
                       tiny_model.state_dict()["model.4.cv1.conv.weight"].half().float())


def test_yolotui_checkpoints_still_load_as_sources(tmp_path):
    path = tmp_path / "mine.pt"
    torch.save({"model_yaml": dict(TINY_CFG), "nc": 5, "model": {"w": torch.ones(1)}, "ema": None}, path)
    source = load_weights_source(path)
    assert "official" not in source and source["nc"] == 5


class _Evil:
    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


class _EvalEvil:
    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return (eval, (f"__import__('os').system({self.command!r})",))


@pytest.mark.parametrize("evil_type", [_Evil, _EvalEvil])
def test_a_pickle_that_calls_code_is_refused_and_nothing_runs(tmp_path, evil_type):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"epoch": 1, "model": evil_type(f"touch {marker}")}, path)
    with pytest.raises(UserError) as info:
        read_official(path)
    message = str(info.value)
    assert "evil.pt" in message and "refused" in message and "\n" not in message
    assert not marker.exists()
    with pytest.raises(UserError):
        load_weights_source(path)  # the trainer's --weights path
    with pytest.raises(UserError):
        load_model_for_eval(path)  # yolotui val's path
    assert not marker.exists()


def test_a_raw_pickle_calling_code_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "raw.pt"
    path.write_bytes(pickle.dumps({"model": _Evil(f"touch {marker}")}, protocol=2))
    with pytest.raises(UserError, match="raw.pt"):
        read_official(path)
    assert not marker.exists()


def test_a_module_attribute_calling_code_is_refused(tmp_path, tiny_model):
    marker = tmp_path / "pwned"
    path = tmp_path / "w.pt"
    save_fake_official(path, tiny_model, nc=5, payload=_Evil(f"touch {marker}"))
    with pytest.raises(UserError, match="posix.system|os.system|nt.system"):
        read_official(path)
    assert not marker.exists()


def test_garbage_and_truncated_files_are_one_line_errors(tmp_path, tiny_model):
    path = tmp_path / "w.pt"
    save_fake_official(path, tiny_model, nc=5)
    cut = tmp_path / "cut.pt"
    cut.write_bytes(path.read_bytes()[:300])
    for bad in (cut, tmp_path / "missing.pt"):
        with pytest.raises(UserError) as info:
            read_official(bad)
        assert bad.name in str(info.value) and "\n" not in str(info.value)


def _cli_train(tmp_path, weights, capsys, monkeypatch):
    from yolotui.cli import main

    launched = []
    monkeypatch.setattr("yolotui.placement.launcher.launch", lambda run_dir, command, **kw: launched.append(command))
    data = make_data(tmp_path / "data", n_train=2, n_val=1, img=64)
    code = main(["train", "--weights", str(weights), "--data", str(data), "--device", "cpu", "--batch", "4",
                 "--project", str(tmp_path / "runs"), "--name", "ft"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err, launched


def test_train_cli_takes_official_weights_with_a_note(tmp_path, tiny_model, capsys, monkeypatch):
    path = tmp_path / "official.pt"
    save_fake_official(path, tiny_model, nc=5)
    code, out, _, launched = _cli_train(tmp_path, path, capsys, monkeypatch)
    assert code == 0 and len(launched) == 1
    assert "an official YOLOv9 checkpoint" in out


def test_train_cli_refuses_code_running_weights_before_detaching(tmp_path, capsys, monkeypatch):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"epoch": 1, "model": _Evil(f"touch {marker}")}, path)
    code, _, err, launched = _cli_train(tmp_path, path, capsys, monkeypatch)
    assert code == 2 and not launched and "evil.pt: refused" in err and err.count("\n") == 1
    assert not marker.exists() and not (tmp_path / "runs" / "ft").exists()


def test_val_cli_on_an_official_checkpoint(tmp_path, tiny_model, capsys):
    import json

    from yolotui.cli import main

    path = tmp_path / "official.pt"
    save_fake_official(path, tiny_model, nc=5)
    data = make_data(tmp_path / "data", n_train=2, n_val=2, img=64)
    assert main(["val", "--weights", str(path), "--data", str(data), "--img", "64", "--device", "cpu",
                 "--workers", "0", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["weights"] == str(path) and 0.0 <= result["mAP50"] <= 1.0 and result["images"] == 2


def test_finetune_cli_from_an_official_checkpoint(tmp_path, tiny_model, capsys, monkeypatch):
    from yolotui.cli import main

    launched = []
    monkeypatch.setattr("yolotui.placement.launcher.launch", lambda run_dir, command, **kw: launched.append(run_dir))
    path = tmp_path / "official.pt"
    save_fake_official(path, tiny_model, nc=5)
    data = make_data(tmp_path / "data", n_train=2, n_val=1, img=64)
    assert main(["finetune", "--from", str(path), "--data", str(data), "--device", "cpu", "--batch-size", "4",
                 "--project", str(tmp_path / "runs")]) == 0
    (run_dir,) = launched
    assert run_dir.name == "official-ft" and "an official YOLOv9 checkpoint" in capsys.readouterr().out
