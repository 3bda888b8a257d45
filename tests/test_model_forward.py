"""Forward, backward, decoding and conversion of narrow copies of the shipped configs on tiny images."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from yolotui.configs import shipped_model_configs
from yolotui.engine.model import YoloModel, build_model, convert_for_inference, fuse, narrow_config
from yolotui.engine.model.builder import load_model_yaml
from yolotui.engine.model.heads import DDetect, DualDDetect

NC = 3


@pytest.fixture(autouse=True)
def _threads():
    torch.set_num_threads(1)  # 2 threads thrash on a shared 2-core machine
    torch.manual_seed(0)


def narrow(name: str, factor: float = 0.125, nc: int = NC) -> YoloModel:
    cfg, _ = load_model_yaml(name)
    return build_model(narrow_config(cfg, factor), nc=nc)


def randomize_batchnorm(model: nn.Module) -> None:
    """Non-trivial BN statistics so that fusing has something to fold."""
    gen = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            n = m.num_features
            m.running_mean.copy_((torch.rand(n, generator=gen) - 0.5) * 0.2)
            m.running_var.copy_(0.8 + 0.4 * torch.rand(n, generator=gen))
            m.weight.data.copy_(0.8 + 0.4 * torch.rand(n, generator=gen))
            m.bias.data.copy_((torch.rand(n, generator=gen) - 0.5) * 0.2)


@pytest.mark.parametrize("name", shipped_model_configs())
def test_forward_backward_on_64px(name):
    model = narrow(name).train()
    out = model(torch.rand(2, 3, 64, 64))
    branches = out if name.startswith("yolov9") else [out]
    assert len(branches) == (2 if name.startswith("yolov9") else 1)
    for maps in branches:
        assert [tuple(m.shape) for m in maps] == [(2, 64 + NC, 8, 8), (2, 64 + NC, 4, 4), (2, 64 + NC, 2, 2)]
    loss = sum(m.square().mean() for maps in branches for m in maps)
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert model.stride.tolist() == [8.0, 16.0, 32.0]


def test_training_returns_aux_then_main_branch():
    model = narrow("yolov9-t").train()
    assert isinstance(model.detect, DualDDetect)
    assert model.model[-1].sources == [28, 25, 22, 15, 18, 21]
    x = torch.rand(1, 3, 64, 64)
    aux, main = model(x)
    # layer 28 belongs to the auxiliary neck only: changing it moves aux P3, never the main branch
    with torch.no_grad():
        for p in model.model[28].parameters():
            p.add_(0.5)
    aux2, main2 = model(x)
    assert not torch.allclose(aux[0], aux2[0])
    assert all(torch.equal(a, b) for a, b in zip(main, main2))


def test_eval_returns_decoded_main_branch_and_maps():
    model = narrow("yolov9-s").eval()
    with torch.no_grad():
        decoded, maps = model(torch.rand(2, 3, 64, 64))
    assert decoded.shape == (2, 4 + NC, 64 + 16 + 4)
    aux, main = maps
    assert len(aux) == len(main) == 3
    scores = decoded[:, 4:]
    assert (scores >= 0).all() and (scores <= 1).all()


def test_decoding_puts_boxes_in_input_pixels():
    model = narrow("gelan-t").eval()
    head = model.detect
    for branch in head.cv2:  # zero box logits -> uniform DFL bins -> 7.5 bins each side
        branch[-1].weight.data.zero_()
        branch[-1].bias.data.zero_()
    with torch.no_grad():
        decoded, _ = model(torch.rand(1, 3, 64, 64))
    strides = torch.cat([torch.full((n,), s) for n, s in ((64, 8.0), (16, 16.0), (4, 32.0))])
    assert torch.allclose(decoded[0, 2], 15 * strides)  # width = (7.5 + 7.5) * stride
    assert torch.allclose(decoded[0, 3], 15 * strides)
    assert decoded[0, 0, 0].item() == pytest.approx(4.0)  # first P3 cell centre x = 0.5 * 8
    assert decoded[0, 0, 64].item() == pytest.approx(8.0)  # first P4 cell centre x = 0.5 * 16


def test_official_bias_initialisation():
    model = build_model("gelan-t", nc=NC)
    head = model.detect
    for box, cls, s in zip(head.cv2, head.cv3, (8, 16, 32)):
        assert torch.all(box[-1].bias == 1.0)
        assert torch.allclose(cls[-1].bias, torch.full((NC,), math.log(5 / NC / (640 / s) ** 2)))


def test_state_dict_keys_follow_official_layout():
    keys = set(narrow("yolov9-c").state_dict())
    for key in ("model.1.conv.weight", "model.1.bn.running_var", "model.3.cv2.0.m.0.cv1.conv1.conv.weight",
                "model.3.cv2.0.m.0.cv1.conv2.bn.weight", "model.4.cv1.conv.weight", "model.10.cv5.conv.weight",
                "model.23.conv.weight", "model.38.cv4.0.0.conv.weight", "model.38.cv5.2.2.bias",
                "model.38.dfl.conv.weight", "model.38.dfl2.conv.weight"):
        assert key in keys, key
    assert not any("stride" in k or "anchor" in k for k in keys)


@pytest.mark.parametrize("size", ["t", "c", "e"])
def test_conversion_keeps_main_branch_and_gelan_layout(size):
    model = narrow(f"yolov9-{size}")
    randomize_batchnorm(model)
    model.eval()
    x = torch.rand(2, 3, 64, 64)
    with torch.no_grad():
        expected, _ = model(x)
        converted = convert_for_inference(model)
        got, maps = converted(x)
    assert isinstance(converted.detect, DDetect) and not converted.training
    assert (got - expected).abs().max().item() < 1e-4
    assert len(maps) == 3
    # the converted model is the fused GELAN model of the same size, key for key and shape for shape
    gelan = fuse(narrow(f"gelan-{size}"))
    assert {k: v.shape for k, v in converted.state_dict().items()} == {
        k: v.shape for k, v in gelan.state_dict().items()}
    assert len(converted.model) == len(gelan.model)


def test_conversion_is_exact_in_double_precision():
    model = narrow("yolov9-m").double()
    randomize_batchnorm(model)
    model.eval()
    x = torch.rand(1, 3, 64, 64, dtype=torch.float64)
    with torch.no_grad():
        expected, _ = model(x)
        got, _ = convert_for_inference(model)(x)
    assert got.dtype == torch.float64
    assert (got - expected).abs().max().item() < 1e-9


def test_fuse_preserves_output_and_removes_batchnorm():
    model = narrow("gelan-s")
    randomize_batchnorm(model)
    model.eval()
    x = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        before, _ = model(x)
        fuse(model)
        after, _ = model(x)
    assert not any(isinstance(m, nn.BatchNorm2d) for m in model.modules())
    assert (before - after).abs().max().item() < 1e-4


def test_official_weights_transfer_by_name_between_builds():
    first, second = narrow("yolov9-s"), narrow("yolov9-s")
    second.load_state_dict(first.state_dict(), strict=True)
    first.eval()
    second.eval()
    x = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        assert torch.equal(first(x)[0], second(x)[0])


def test_model_attributes():
    model = narrow("yolov9-c")
    assert model.nc == NC and model.reg_max == 16
    assert model.backbone_layers == 10
    assert model.yaml["nc"] == NC
    layer = model.model[12]
    assert (layer.i, layer.f, layer.type) == (12, [-1, 7], "Concat")
    # the config dict alone rebuilds the model (what a checkpoint stores)
    rebuilt = build_model(model.yaml)
    assert rebuilt.state_dict().keys() == model.state_dict().keys()


def test_width_and_depth_multiples_follow_official_semantics():
    cfg, _ = load_model_yaml("gelan-c")
    cfg["width_multiple"], cfg["depth_multiple"] = 0.5, 1.0
    model = build_model(cfg, device="meta")
    # only the output width (first arg) scales: RepNCSPELAN4 [512, 256, 128, 1] -> c2 256, c3 still 256
    block = model.model[4]
    assert block.cv4.conv.out_channels == 256
    assert block.cv1.conv.out_channels == 256


@pytest.mark.parametrize("size", ["t", "c", "e"])  # s and m share t's and c's shapes
def test_inference_config_of_yolov9_is_the_shipped_gelan(size):
    from yolotui.engine.model.convert import inference_config

    def absolute_rows(cfg: dict) -> list:
        rows = []
        for i, (f, n, module, args) in enumerate(cfg["backbone"] + cfg["head"]):
            absolute = [i - 1 if j == -1 else j for j in (f if isinstance(f, list) else [f])]
            rows.append([absolute, n, module, args])
        return rows

    cfg, _ = inference_config(build_model(f"yolov9-{size}", device="meta"))
    gelan, _ = load_model_yaml(f"gelan-{size}")
    assert absolute_rows(cfg) == absolute_rows(gelan)
    assert len(cfg["backbone"]) == len(gelan["backbone"])
