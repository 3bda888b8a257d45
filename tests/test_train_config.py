"""Training options without torch: defaults, shipped files by name, validation errors before launch."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from trainkit import make_data, write_tiny_cfg

from yolotui.config import (
    TRAIN_DEFAULTS,
    default_options,
    load_hyp,
    opt_yaml_dict,
    round_imgsz,
    validate_options,
)
from yolotui.configs import resolve_hyp
from yolotui.devices import parse_device
from yolotui.errors import UserError


def test_official_defaults_and_hyp_recipe():
    assert TRAIN_DEFAULTS["epochs"] == 100 and TRAIN_DEFAULTS["batch_size"] == 16
    assert TRAIN_DEFAULTS["imgsz"] == 640 and TRAIN_DEFAULTS["optimizer"] == "SGD"
    assert TRAIN_DEFAULTS["patience"] == 100 and TRAIN_DEFAULTS["freeze"] == [0]
    hyp = load_hyp(resolve_hyp("hyp.scratch-high.yaml"))
    assert hyp["lr0"] == 0.01 and hyp["box"] == 7.5 and hyp["cls"] == 0.5 and hyp["dfl"] == 1.5
    assert hyp["mixup"] == 0.15 and hyp["scale"] == 0.9


def test_shipped_hyp_resolves_by_name(tmp_path):
    assert resolve_hyp("data/hyps/hyp.scratch-high.yaml").name == "hyp.scratch-high.yaml"
    assert resolve_hyp(None).name == "hyp.scratch-high.yaml"
    with pytest.raises(UserError, match="no such file"):
        resolve_hyp(tmp_path / "hyp.mine.yaml")


def test_imgsz_rounds_up_with_a_warning():
    assert round_imgsz(640) == (640, None)
    size, warning = round_imgsz(100)
    assert size == 128 and "multiple of 32" in warning


def test_devices_are_checked_without_torch():
    assert parse_device("cpu") is None
    assert parse_device("", count=0) is None
    assert parse_device("0,1", count=2) == [0, 1]
    with pytest.raises(UserError, match="cuda:3 does not exist"):
        parse_device("cuda:3", count=1)
    with pytest.raises(UserError, match="no CUDA device"):
        parse_device("0", count=0)
    with pytest.raises(UserError, match="not a device"):
        parse_device("gpu", count=1)


def test_validation_errors(tmp_path):
    data = str(make_data(tmp_path, n_train=2, n_val=1))
    cfg = str(write_tiny_cfg(tmp_path))
    good = {"data": data, "cfg": cfg, "device": "cpu"}
    opt, warnings = validate_options(default_options(**good, imgsz=100))
    assert opt["imgsz"] == 128 and warnings
    for bad, message in [
        ({"batch_size": 0}, "--batch-size 0"),
        ({"epochs": 0}, "--epochs 0"),
        ({"data": str(tmp_path / "nope.yaml")}, "--data"),
        ({"cfg": str(tmp_path / "nope.yaml")}, "--cfg"),
        ({"weights": str(tmp_path / "w.pt")}, "--weights"),
        ({"hyp": str(tmp_path / "h.yaml")}, "--hyp"),
        ({"device": "cuda:3"}, "--device"),
        ({"cos_lr": True, "fixed_lr": True}, "exclude each other"),
    ]:
        with pytest.raises(UserError, match=message):
            validate_options(default_options(**{**good, **bad}))


def test_opt_yaml_has_official_keys():
    out = opt_yaml_dict(default_options())
    for key in ("weights", "cfg", "data", "hyp", "epochs", "batch_size", "imgsz", "rect", "noval", "sync_bn",
                "close_mosaic", "min_items", "flat_cos_lr"):
        assert key in out
    yaml.safe_dump(out)


def test_config_never_imports_torch():
    code = "import sys, yolotui.config, yolotui.configs, yolotui.commands.train; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cli_rejects_unknown_flag_and_bad_input(tmp_path, yolotui_cmd, cli_env):
    data = str(make_data(tmp_path, n_train=2, n_val=1))
    cfg = str(write_tiny_cfg(tmp_path))
    base = [*yolotui_cmd, "train", "--data", data, "--cfg", cfg, "--project", str(tmp_path / "runs")]
    unknown = subprocess.run([*base, "--rect"], env=cli_env, capture_output=True, text=True)
    assert unknown.returncode == 2 and "unrecognized arguments: --rect" in unknown.stderr
    bad = subprocess.run([*base, "--batch", "0"], env=cli_env, capture_output=True, text=True)
    assert bad.returncode == 2 and "--batch-size 0: must be at least 1" in bad.stderr
    device = subprocess.run([*base, "--device", "cuda:3"], env=cli_env, capture_output=True, text=True)
    assert device.returncode == 2 and "--device cuda:3" in device.stderr
    assert not (tmp_path / "runs").exists()  # nothing was created, nothing detached
