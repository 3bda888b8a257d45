"""Parameter counts and GFLOPs of every shipped config against the official implementation's figures."""

from __future__ import annotations

import json

import pytest
import torch

from yolotui.configs import MODELS_DIR, shipped_model_configs

# Measured with the official YOLOv9 code from its own configs at nc=80:
# training params, fused params, GFLOPs at 640 training / fused.
OFFICIAL = {
    "yolov9-t": (3_717_680, 3_674_576, 16.53, 16.17),
    "yolov9-s": (9_804_512, 9_659_168, 39.95, 39.06),
    "yolov9-m": (32_878_432, 32_667_400, 133.02, 131.33),
    "yolov9-c": (51_182_080, 50_880_768, 239.88, 237.64),
    "yolov9-e": (69_529_664, 68_669_632, 245.53, 241.36),
    "gelan-t": (2_442_640, 2_407_632, 10.08, 9.82),
    "gelan-s": (7_226_208, 7_105_888, 27.04, 26.38),
    "gelan-m": (20_124_000, 19_978_672, 77.35, 76.32),
    "gelan-c": (25_498_752, 25_288_768, 103.51, 102.15),
    "gelan-e": (58_114_432, 57_345_920, 192.50, 188.95),
}


@pytest.fixture(scope="module")
def summaries() -> dict[str, dict]:
    from yolotui.engine.model.summary import summarize

    torch.set_num_threads(1)  # 2 threads thrash on a shared 2-core machine
    return {name: summarize(name, nc=80, imgsz=640) for name in OFFICIAL}


def test_every_config_is_shipped():
    assert sorted(OFFICIAL) == shipped_model_configs()


@pytest.mark.parametrize("name", sorted(OFFICIAL))
def test_parameter_counts_match_official(summaries, name):
    params, params_fused, _, _ = OFFICIAL[name]
    assert summaries[name]["train"]["params"] == params
    assert summaries[name]["fused"]["params"] == params_fused


@pytest.mark.parametrize("name", sorted(OFFICIAL))
def test_gflops_within_two_percent(summaries, name):
    _, _, gflops, gflops_fused = OFFICIAL[name]
    assert summaries[name]["train"]["gflops"] == pytest.approx(gflops, rel=0.02)
    assert summaries[name]["fused"]["gflops"] == pytest.approx(gflops_fused, rel=0.02)


@pytest.mark.parametrize("size", ["t", "s", "m", "c", "e"])
def test_converted_yolov9_has_gelan_counts(summaries, size):
    converted = summaries[f"yolov9-{size}"]["inference"]
    gelan = summaries[f"gelan-{size}"]["fused"]
    assert converted["params"] == OFFICIAL[f"gelan-{size}"][1]
    assert converted == gelan  # same layers, parameters and GFLOPs


def test_gelan_inference_is_its_fused_model(summaries):
    for size in "tsmce":
        assert summaries[f"gelan-{size}"]["inference"] == summaries[f"gelan-{size}"]["fused"]


def test_summary_json_matches_model_info(summaries):
    shipped = json.loads((MODELS_DIR / "summary.json").read_text())
    assert sorted(shipped) == sorted(OFFICIAL)
    for name, s in summaries.items():
        row = shipped[name]
        assert row["layers"] == s["train"]["layers"]
        assert row["params"] == s["train"]["params"]
        assert row["params_fused"] == s["fused"]["params"]
        assert row["gflops"] == pytest.approx(s["train"]["gflops"], abs=0.01)
        assert row["gflops_fused"] == pytest.approx(s["fused"]["gflops"], abs=0.01)
        assert row["params_inference"] == s["inference"]["params"]


def test_known_layer_count_of_yolov9_c(summaries):
    # the official summary line reads "962 layers" for YOLOv9-C: modules counted the same way
    assert summaries["yolov9-c"]["train"]["layers"] == 962
