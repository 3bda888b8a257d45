"""BatchNorm recalibration (yolotui/engine/train/ema.py): stale running statistics are replaced by exact ones."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from yolotui.engine.train.ema import batch_norm_layers, recalibrate_bn


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8, momentum=0.03), nn.SiLU(),
                         nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8, momentum=0.03), nn.SiLU())


def _stale(net: nn.Module) -> None:
    """Running statistics as a lagging average leaves them: far too small a variance."""
    for bn in batch_norm_layers(net):
        bn.running_var.fill_(1e-4)
        bn.running_mean.fill_(0.5)


def test_eval_output_matches_batch_statistics_after_recalibration():
    net = _net()
    images = torch.rand(6, 3, 16, 16)
    with torch.no_grad():
        reference = net.train()(images)  # normalised with the batch's own statistics
    _stale(net)
    net.eval()
    with torch.no_grad():
        stale_error = (net(images) - reference).abs().max().item()
    seen = recalibrate_bn(net, [images[:3], images[3:]])
    assert seen == 6
    assert not net.training, "the model's mode is restored"
    assert all(bn.momentum == 0.03 for bn in batch_norm_layers(net)), "momentum restored"
    with torch.no_grad():
        error = (net(images) - reference).abs().max().item()
    assert stale_error > 1.0
    assert error < 0.02  # only the unbiased-variance factor n/(n-1) of the running estimate remains


def test_uint8_batches_are_scaled_like_the_trainer_does():
    net_a, net_b = _net(), _net()
    images = torch.randint(0, 256, (4, 3, 8, 8), dtype=torch.uint8)
    recalibrate_bn(net_a, [images])
    recalibrate_bn(net_b, [images.float() / 255])
    for a, b in zip(batch_norm_layers(net_a), batch_norm_layers(net_b)):
        assert torch.allclose(a.running_var, b.running_var) and torch.allclose(a.running_mean, b.running_mean)


def test_no_batches_leave_statistics_untouched_and_training_mode_kept():
    net = _net().train()
    _stale(net)
    assert recalibrate_bn(net, []) == 0
    assert net.training
    for bn in batch_norm_layers(net):
        assert torch.all(bn.running_var == 1e-4) and bn.momentum == 0.03


def test_model_without_batch_norm_is_a_no_op():
    net = nn.Sequential(nn.Conv2d(3, 4, 1))
    assert recalibrate_bn(net, [torch.rand(1, 3, 4, 4)]) == 0


@pytest.mark.parametrize("cfg", ["gelan-t"])
def test_recalibrated_yolo_model_gives_finite_bounded_eval_maps(cfg):
    from yolotui.engine.model import build_model

    torch.manual_seed(0)
    model = build_model(cfg, nc=2)
    _stale(model)
    images = torch.rand(8, 3, 128, 128)  # enough values per channel at stride 32 for a stable estimate
    model.eval()
    with torch.no_grad():
        stale = max(m.abs().max().item() for m in model(images)[1])
    recalibrate_bn(model, [images])
    with torch.no_grad():
        calibrated = max(m.abs().max().item() for m in model(images)[1])
    assert calibrated < 100
    assert not stale < 100, "stale statistics blow the maps up (or to NaN)"


def test_failed_pass_restores_the_old_statistics():
    net = _net()
    _stale(net)
    with pytest.raises(ValueError):
        recalibrate_bn(nn.Sequential(net, nn.Flatten(), nn.BatchNorm1d(8 * 4 * 4)), [torch.rand(1, 3, 4, 4)])
    for bn in batch_norm_layers(net):
        assert torch.all(bn.running_var == 1e-4) and bn.momentum == 0.03


def test_trainer_recalibrates_the_ema_model_before_each_validation(tmp_path, monkeypatch):
    from tests.trainkit import make_run
    from yolotui.engine.evaluate import validate as validation
    from yolotui.engine.train import ema as bn_calibration
    from yolotui.engine.train.trainer import Trainer

    calls: list[tuple[int, int]] = []
    real_recalibrate, real_validation = bn_calibration.recalibrate_bn, validation.validation_metrics

    def spy_recalibrate(model, batches, device="cpu", **kwargs):
        seen = real_recalibrate(model, batches, device, **kwargs)
        calls.append((id(model), seen))
        return seen

    def spy_validation(model, *args, **kwargs):
        assert calls and calls[-1][0] == id(model), "validation sees the model just recalibrated"
        return real_validation(model, *args, **kwargs)

    monkeypatch.setattr(bn_calibration, "recalibrate_bn", spy_recalibrate)
    monkeypatch.setattr(validation, "validation_metrics", spy_validation)
    trainer = Trainer(make_run(tmp_path, epochs=2))
    trainer.setup()
    assert trainer.train() == 0
    assert [seen for _, seen in calls] == [8, 8]  # every training image of the tiny set (fewer than 64)
    assert {model_id for model_id, _ in calls} == {id(trainer.ema.ema)}
