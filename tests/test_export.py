"""`yolotui export`: the converted inference model round-trips, matches the training model, and ONNX matches torch.

The model is a narrow YOLOv9-T (dual head with the PGI branch, RepConvN blocks) with randomised batch-norm
statistics, so fusing and dropping the auxiliary branch are really exercised; images are 64 px.
"""

from __future__ import annotations

import copy
import json

import pytest
import torch
from syspkg import require_module
from test_official_weights import save_fake_official
from trainkit import TINY_CFG, make_data

from yolotui.cli import main
from yolotui.engine.model import build_model, narrow_config
from yolotui.engine.model.builder import load_model_yaml
from yolotui.engine.model.heads import DDetect, DualDDetect
from yolotui.engine.tools.weights import load_model_for_eval

IMG = 64


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _randomize_batchnorm(model):
    generator = torch.Generator().manual_seed(3)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            n = module.num_features
            module.running_mean.copy_(torch.randn(n, generator=generator) * 0.1)
            module.running_var.copy_(torch.rand(n, generator=generator) + 0.5)
            module.weight.data.copy_(torch.rand(n, generator=generator) + 0.5)
            module.bias.data.copy_(torch.randn(n, generator=generator) * 0.1)


def dual_checkpoint(path, nc=5):
    """A yolotui checkpoint of a narrow yolov9-t (DualDDetect + RepConvN)."""
    torch.manual_seed(0)
    cfg, _ = load_model_yaml("yolov9-t")
    model = build_model(narrow_config(cfg, 0.25), nc=nc)
    _randomize_batchnorm(model)
    state = model.state_dict()
    torch.save({"format": "yolotui-1", "model_yaml": model.yaml, "nc": nc, "names": [f"c{i}" for i in range(nc)],
                "epoch": 3, "epochs": 3, "step": 0, "model": state, "ema": state, "best_fitness": 0.0}, path)
    return model


def test_export_pt_drops_aux_branch_fuses_and_matches(tmp_path, capsys):
    weights = tmp_path / "best.pt"
    dual_checkpoint(weights)
    data = make_data(tmp_path / "data", n_train=1, n_val=3, img=IMG)
    assert main(["export", "--weights", str(weights), "--img", str(IMG), "--val", str(data), "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    out = tmp_path / "best-inference.pt"
    assert report["pt_path"] == str(out) and out.is_file() and report["onnx_path"] is None
    assert report["train"]["head"] == "DualDDetect" and report["inference"]["head"] == "DDetect"
    assert report["inference"]["params"] < report["train"]["params"]
    assert report["converted"]["ok"] and report["converted"]["score"] < 1e-4 and report["converted"]["box"] < 1e-2
    assert "max abs diff" in captured.err
    # the file loads safely, rebuilt fused: no BatchNorm, no RepConvN branches, no auxiliary head
    assert isinstance(torch.load(out, weights_only=True), dict)
    model, info = load_model_for_eval(out)
    assert isinstance(model.model[-1], DDetect) and not isinstance(model.model[-1], DualDDetect)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())
    assert info["names"] == [f"c{i}" for i in range(5)]
    # both validations ran on the same three images and agree
    assert report["val_train"] is not None and report["val_export"] is not None
    for key in ("mAP50", "mAP50-95"):
        assert abs(report["val_train"][key] - report["val_export"][key]) <= 0.001
    assert "val training model" in captured.err and "val exported model" in captured.err


def tiny_checkpoint(path, nc=5):
    """A yolotui checkpoint of the ~0.1 M parameter test model (DDetect head): quick to export to ONNX."""
    torch.manual_seed(0)
    model = build_model(copy.deepcopy(TINY_CFG), nc=nc)
    _randomize_batchnorm(model)
    state = model.state_dict()
    torch.save({"format": "yolotui-1", "model_yaml": model.yaml, "nc": nc, "model": state, "ema": state}, path)


@pytest.mark.parametrize("opset", [18, 17])  # 18: the dynamo exporter (onnxscript); 17: TorchScript
def test_export_onnx_matches_pytorch(tmp_path, capsys, opset):
    require_module("onnxruntime", why="the ONNX export check")
    weights = tmp_path / "w.pt"
    tiny_checkpoint(weights)
    out = tmp_path / "deploy" / "model.pt"
    assert main(["export", "--weights", str(weights), "--format", "onnx", "--img", str(IMG), "--dynamic",
                 "--opset", str(opset), "--output", str(out)]) == 0
    text = capsys.readouterr().out
    onnx_path = out.with_suffix(".onnx")
    assert out.is_file() and onnx_path.is_file() and "ONNX Runtime vs PyTorch" in text and "export ok" in text
    assert sorted(p.name for p in out.parent.iterdir()) == ["model.onnx", "model.pt"]  # no temporary left
    import onnx

    assert onnx.load(str(onnx_path)).opset_import[0].version == opset
    import onnxruntime as ort

    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    x = torch.rand(2, 3, IMG, IMG)  # dynamic batch: two at once
    got = torch.from_numpy(session.run(None, {"images": x.numpy()})[0])
    model, _ = load_model_for_eval(out)
    with torch.no_grad():
        expected = model(x)[0]
    assert got.shape == expected.shape == (2, 4 + 5, 84)
    assert (got - expected).abs().max().item() < 1e-3


def test_export_reads_an_official_checkpoint(tmp_path, capsys):
    torch.manual_seed(1)
    model = build_model(copy.deepcopy(TINY_CFG), nc=5)
    path = tmp_path / "yolov9-official.pt"
    save_fake_official(path, model, nc=5)
    assert main(["export", "--weights", str(path), "--img", str(IMG), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["converted"]["ok"] and report["inference"]["head"] == "DDetect"
    exported, info = load_model_for_eval(tmp_path / "yolov9-official-inference.pt")
    assert info["names"][0] == "class0"


def test_bad_input_is_one_line(tmp_path, capsys):
    assert main(["export", "--weights", str(tmp_path / "nope.pt")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope.pt" in err
    weights = tmp_path / "w.pt"
    dual_checkpoint(weights)
    assert main(["export", "--weights", str(weights), "--img", "65"]) == 2
    assert "multiple of the model stride" in capsys.readouterr().err
    assert main(["export", "--weights", str(weights), "--format", "onnx", "--half"]) == 2
    assert "CUDA" in capsys.readouterr().err
    assert main(["export", "--weights", str(weights), "--img", str(IMG), "--output", str(weights)]) == 2
    assert "overwrite" in capsys.readouterr().err


def test_export_half_writes_fp16_weights(tmp_path, capsys):
    weights = tmp_path / "w.pt"
    tiny_checkpoint(weights)
    assert main(["export", "--weights", str(weights), "--img", str(IMG), "--half", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    saved = torch.load(tmp_path / "w-inference.pt", weights_only=True)
    assert saved["half"] and all(v.dtype == torch.float16 for v in saved["model"].values() if v.is_floating_point())
    assert report["converted"]["ok"] and report["converted"]["box"] > 0  # fp16 rounding shows, within tolerance



# A freshly trained run: few steps from scratch leave large logits and near-ties between DFL bins, where float
# rounding (which fusing reorders) moves a box by a pixel or a score near 0.5 by 1e-3. `yolotui export` must
# call such a correct conversion ok. The configs the tests train: the tiny test model at two sizes, gelan-t
# (the demo's model) and yolov9-t (dual head, PGI branch dropped on export).
@pytest.mark.parametrize(("cfg", "img", "fmt"), [("tiny", 64, "onnx"), ("tiny", 96, "pt"), ("gelan-t", 64, "pt"),
                                                 ("gelan-t", 64, "onnx"), ("yolov9-t", 64, "pt")])
def test_a_freshly_trained_run_exports_and_passes_its_checks(tmp_path, capsys, cfg, img, fmt):
    if fmt == "onnx":
        require_module("onnxruntime", why="the ONNX export check")
    from trainkit import make_run, run_trainer

    data = make_data(tmp_path / "data", n_train=16, n_val=8, img=img)
    run = make_run(tmp_path, "r", data=data, imgsz=img, epochs=1, batch_size=8,
                   **({} if cfg == "tiny" else {"cfg": cfg}))
    done = run_trainer(run)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    weights = run / "weights" / "best.pt"
    assert main(["export", "--weights", str(weights), "--img", str(img), "--format", fmt, "--val", str(data),
                 "--json"]) == 0, capsys.readouterr().err
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["converted"]["ok"] and report["converted"]["worst"] <= 1.0
    assert report["converted"]["logits"] < 1e-3
    if fmt == "onnx":
        assert report["onnx"]["ok"]
    for key in ("mAP50", "mAP50-95"):
        assert abs(report["val_train"][key] - report["val_export"][key]) <= 0.001


def test_a_conversion_mistake_is_still_caught(tmp_path):
    from trainkit import make_run, run_trainer

    from yolotui.engine.model import convert_for_inference
    from yolotui.engine.tools.export import sample_batch
    from yolotui.engine.tools.parity import compare_outputs, head_outputs

    run = make_run(tmp_path, "r", data=make_data(tmp_path / "data", n_train=16, n_val=4, img=IMG), epochs=1,
                   batch_size=8)
    assert run_trainer(run).returncode == 0
    model, _ = load_model_for_eval(run / "weights" / "best.pt")
    images = sample_batch([], IMG)
    reference = head_outputs(model, images)
    converted = convert_for_inference(copy.deepcopy(model))
    assert compare_outputs(reference, head_outputs(converted, images), False).ok
    # a fusing mistake: one conv's folded batch-norm scale 1% off (a wrong eps or variance, say)
    layer = next(m for m in converted.model[1].modules() if isinstance(m, torch.nn.Conv2d))
    with torch.no_grad():
        layer.weight.mul_(1.01)
    broken = compare_outputs(reference, head_outputs(converted, images), False)
    assert not broken.ok and broken.logits > 1e-3 and broken.worst > 1.0
    # the decoded output alone (what the ONNX check sees) shows it too
    assert not compare_outputs(reference, head_outputs(converted, images).decoded, False).ok
