"""`yolotui val` and checkpoint loading for evaluation: bad input gives one clear line naming the file."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from yolotui.cli import main
from yolotui.commands.val import format_table
from yolotui.engine.evaluate.validate import ValResult
from yolotui.engine.tools.weights import read_checkpoint
from yolotui.errors import UserError


def run_cli(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_missing_weights_is_one_line(tmp_path, capsys):
    code, out, err = run_cli(["val", "--weights", str(tmp_path / "nope.pt"), "--data", "x.yaml"], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "nope.pt" in err and "not found" in err


def test_bad_numbers_are_refused_before_anything_loads(tmp_path, capsys):
    weights = tmp_path / "w.pt"
    weights.write_bytes(b"")
    for flag, value in (("--batch", "0"), ("--conf", "1.5"), ("--iou", "-0.1"), ("--img", "16")):
        code, _, err = run_cli(["val", "--weights", str(weights), "--data", "x.yaml", flag, value], capsys)
        assert code == 2 and flag in err


def test_missing_data_yaml_names_the_file(tmp_path, capsys):
    weights = tmp_path / "w.pt"
    torch.save({"model_yaml": {}, "model": {}}, weights)
    code, _, err = run_cli(["val", "--weights", str(weights), "--data", str(tmp_path / "data.yaml")], capsys)
    assert code == 2 and "data.yaml" in err


def test_an_official_checkpoint_is_refused_by_name(tmp_path, monkeypatch):
    fake_module = types.ModuleType("models.yolo")

    class DetectionModel(torch.nn.Module):
        pass

    DetectionModel.__module__ = "models.yolo"
    DetectionModel.__qualname__ = "DetectionModel"
    fake_module.DetectionModel = DetectionModel
    monkeypatch.setitem(sys.modules, "models", types.ModuleType("models"))
    monkeypatch.setitem(sys.modules, "models.yolo", fake_module)
    path = tmp_path / "yolov9-c.pt"
    torch.save({"epoch": -1, "model": DetectionModel(), "optimizer": None}, path)
    with pytest.raises(UserError) as info:
        read_checkpoint(path)
    message = str(info.value)
    assert "yolov9-c.pt" in message and "no weights" in message and "\n" not in message  # read inertly: empty


def test_other_checkpoints_are_refused_with_the_reason(tmp_path):
    plain = tmp_path / "plain.pt"
    torch.save({"state_dict": {"w": torch.zeros(1)}}, plain)
    with pytest.raises(UserError, match="plain.pt: not a yolotui checkpoint"):
        read_checkpoint(plain)
    broken = tmp_path / "broken.pt"
    broken.write_bytes(plain.read_bytes()[:100])
    with pytest.raises(UserError, match="broken.pt: cannot read the checkpoint"):
        read_checkpoint(broken)
    listed = tmp_path / "list.pt"
    torch.save([1, 2], listed)
    with pytest.raises(UserError, match="expected a yolotui checkpoint dict"):
        read_checkpoint(listed)


def test_table_lists_all_then_each_class():
    result = ValResult(precision=0.9, recall=0.8, map50=0.85, map=0.6, losses=None, seconds=1.0, images=10,
                       instances=25,
                       per_class=[{"class": 0, "name": "circle", "images": 8, "instances": 15, "P": 0.95, "R": 0.9,
                                   "mAP50": 0.9, "mAP50-95": 0.7},
                                  {"class": 1, "name": "square", "images": 5, "instances": 10, "P": 0.85, "R": 0.7,
                                   "mAP50": 0.8, "mAP50-95": 0.5}])
    lines = format_table(result).splitlines()
    assert lines[0].split() == ["Class", "Images", "Instances", "P", "R", "mAP50", "mAP50-95"]
    assert lines[1].split() == ["all", "10", "25", "0.9", "0.8", "0.85", "0.6"]
    assert lines[2].split()[:3] == ["circle", "8", "15"] and lines[3].split()[0] == "square"
