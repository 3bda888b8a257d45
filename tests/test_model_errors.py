"""Bad model configs give one-line UserErrors naming the file, the layer and the problem; config lookup."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from yolotui.configs import MODELS_DIR, resolve_model_cfg, shipped_model_configs
from yolotui.engine.model import build_model
from yolotui.errors import UserError

TINY = {
    "nc": 2,
    "depth_multiple": 1.0,
    "width_multiple": 1.0,
    "backbone": [
        [-1, 1, "Conv", [8, 3, 2]],          # 0 /2
        [-1, 1, "Conv", [16, 3, 2]],         # 1 /4
        [-1, 1, "AConv", [16]],              # 2 /8
        [-1, 1, "ELAN1", [16, 16, 8]],       # 3
        [-1, 1, "ADown", [16]],              # 4 /16
        [-1, 1, "RepNCSPELAN4", [16, 16, 8, 1]],  # 5
        [-1, 1, "AConv", [16]],              # 6 /32
    ],
    "head": [
        [-1, 1, "SPPELAN", [16, 8]],         # 7
        [[3, 5, 7], 1, "DDetect", ["nc"]],   # 8
    ],
}


@pytest.fixture(autouse=True)
def _threads():
    torch.set_num_threads(1)


def write_cfg(tmp_path: Path, cfg: dict) -> Path:
    path = tmp_path / "my-model.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def with_layer(index: int, row: list) -> dict:
    cfg = json.loads(json.dumps(TINY))
    rows = cfg["backbone"] + cfg["head"]
    rows[index] = row
    cfg["backbone"], cfg["head"] = rows[: len(TINY["backbone"])], rows[len(TINY["backbone"]):]
    return cfg


def error_of(tmp_path: Path, cfg: dict) -> str:
    path = write_cfg(tmp_path, cfg)
    with pytest.raises(UserError) as info:
        build_model(path)
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    return message


def test_tiny_config_builds_from_a_file(tmp_path):
    model = build_model(write_cfg(tmp_path, TINY))
    assert model.stride.tolist() == [8.0, 16.0, 32.0]
    assert model.nc == 2


def test_unknown_module(tmp_path):
    message = error_of(tmp_path, with_layer(2, [-1, 1, "FancyConv", [16]]))
    assert "layer 2" in message and "unknown module 'FancyConv'" in message


def test_wrong_number_of_args(tmp_path):
    message = error_of(tmp_path, with_layer(3, [-1, 1, "ELAN1", [16, 16]]))
    assert "layer 3" in message and "wrong number of args" in message and "c3, c4" in message
    message = error_of(tmp_path, with_layer(8, [[3, 5, 7], 1, "DDetect", ["nc", 5]]))
    assert "layer 8" in message and "wrong number of args" in message


def test_from_index_that_does_not_exist(tmp_path):
    message = error_of(tmp_path, with_layer(8, [[3, 5, 12], 1, "DDetect", ["nc"]]))
    assert "layer 8" in message and "`from` index 12 does not exist" in message
    message = error_of(tmp_path, with_layer(1, [-5, 1, "Conv", [16, 3, 2]]))
    assert "layer 1" in message and "index -5" in message


def test_channel_mismatch_in_cbfuse(tmp_path):
    cfg = json.loads(json.dumps(TINY))
    cfg["backbone"] = [
        [-1, 1, "Silence", []],                  # 0
        [-1, 1, "Conv", [16, 3, 2]],             # 1
        [1, 1, "CBLinear", [[8, 16]]],           # 2
        [0, 1, "Conv", [16, 3, 2]],              # 3
        [[2, -1], 1, "CBFuse", [[0]]],           # 4: split 0 has 8 channels, layer 3 has 16
    ]
    cfg["head"] = [[-1, 1, "Conv", [16, 3, 2]], [-1, 1, "Conv", [16, 3, 2]],
                   [-1, 1, "Conv", [16, 3, 2]], [[5, 6, 7], 1, "DDetect", ["nc"]]]
    message = error_of(tmp_path, cfg)
    assert "layer 4" in message and "channels do not match" in message


def test_concat_of_different_sizes_names_the_layer(tmp_path):
    cfg = with_layer(7, [[-1, 3], 1, "Concat", [1]])  # a /32 map joined with a /8 map
    message = error_of(tmp_path, cfg)
    assert "layer 7 (Concat)" in message and "fails on a 128x128 test image" in message


def test_last_layer_must_be_a_head(tmp_path):
    cfg = json.loads(json.dumps(TINY))
    cfg["head"] = cfg["head"][:1]
    assert "detection head" in error_of(tmp_path, cfg)


def test_bad_top_level_and_bad_yaml(tmp_path):
    cfg = dict(TINY, nc=0)
    assert "`nc` must be a positive" in error_of(tmp_path, cfg)
    path = tmp_path / "broken.yaml"
    path.write_text("nc: 3\nbackbone: [[-1, 1, Conv\n")
    with pytest.raises(UserError, match="broken.yaml.*not valid YAML"):
        build_model(path)


def test_unsupported_activation(tmp_path):
    assert "activation" in error_of(tmp_path, dict(TINY, activation="nn.Swoosh()"))
    model = build_model(write_cfg(tmp_path, dict(TINY, activation="nn.LeakyReLU(0.1)")))
    assert isinstance(model.model[0].act, torch.nn.LeakyReLU)
    assert type(build_model(write_cfg(tmp_path, TINY)).model[0].act) is torch.nn.SiLU  # default restored


def test_resolve_model_cfg_forms(tmp_path, monkeypatch):
    shipped = MODELS_DIR / "yolov9-c.yaml"
    assert resolve_model_cfg("yolov9-c") == shipped
    assert resolve_model_cfg("yolov9-c.yaml") == shipped
    assert resolve_model_cfg("models/detect/yolov9-c.yaml") == shipped
    own = write_cfg(tmp_path, TINY)
    assert resolve_model_cfg(str(own)) == own.resolve()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gelan-s.yaml").write_text(yaml.safe_dump(TINY))
    assert resolve_model_cfg("gelan-s.yaml") == (tmp_path / "gelan-s.yaml").resolve()  # a real file wins
    with pytest.raises(UserError, match="not a shipped config name.*yolov9-s"):
        resolve_model_cfg("yolov9-x")
    assert len(shipped_model_configs()) == 10


def test_configs_package_does_not_import_torch():
    code = ("import sys; import yolotui.configs as c; c.resolve_model_cfg('yolov9-s'); c.model_summaries(); "
            "assert 'torch' not in sys.modules and 'yolotui.engine' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parent.parent)


@pytest.fixture
def one_thread_env(cli_env) -> dict[str, str]:
    return dict(cli_env, OMP_NUM_THREADS="1")  # two torch threads thrash on a shared 2-core machine


def test_model_info_cli(yolotui_cmd, one_thread_env, tmp_path):
    from yolotui.engine.model.summary import summarize

    own = write_cfg(tmp_path, TINY)
    result = subprocess.run([*yolotui_cmd, "model-info", "--cfg", str(own), "--nc", "4", "--img", "320", "--json"],
                            env=one_thread_env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    expected = summarize(own, nc=4, imgsz=320)
    assert info["nc"] == 4 and info["img"] == 320
    for key in ("train", "fused", "inference"):
        assert info[key]["params"] == expected[key]["params"]
        assert info[key]["gflops"] == pytest.approx(expected[key]["gflops"])
    assert info["fused"]["params"] < info["train"]["params"]


def test_model_info_cli_error_is_one_line(yolotui_cmd, one_thread_env, tmp_path):
    bad = write_cfg(tmp_path, with_layer(2, [-1, 1, "FancyConv", [16]]))
    result = subprocess.run([*yolotui_cmd, "model-info", "--cfg", str(bad)], env=one_thread_env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "layer 2" in result.stderr and "FancyConv" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_model_info_table_output(capsys):
    import argparse

    from yolotui.commands import model_info

    assert model_info.run(argparse.Namespace(cfg="yolov9-t", nc=None, img=640, json=False)) == 0
    out = capsys.readouterr().out
    assert "3,717,680" in out and "3,674,576" in out and "2,407,632" in out
    assert "auxiliary (PGI) branch" in out
