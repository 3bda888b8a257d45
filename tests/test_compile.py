"""--compile: a compiled run trains, reports its compile time, checkpoints the uncompiled module (loadable without
compile) and resumes bit-identically; the trial step leaves no trace; a compiler failure falls back to eager.

The trainer runs use torch.compile's real (inductor) backend on the CPU: the first compile of the tiny model
takes ~40-50 s on a loaded 2-core machine, later ones hit torch's compile cache (~3 s). The exact-resume test runs
three compiled trainers and is marked slow (`pytest -m slow tests/test_compile.py`); the default suite keeps the
compiled run that trains, checkpoints and loads without compile.
"""

from __future__ import annotations

import signal

import pytest
import torch
from torch import nn
from trainkit import (
    assert_same_weights,
    kill_after_mid_epoch_checkpoint,
    load,
    make_data,
    make_run,
    run_trainer,
    start_trainer,
)

from yolotui.engine.train import compiled
from yolotui.runs.events import read_events
from yolotui.runs.results import read_rows

RUN = {"epochs": 2, "batch_size": 2, "save_period_min": 1e-7, "compile": True}
HYP = {"warmup_epochs": 3.0}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_data(tmp_path_factory.mktemp("data"), n_train=8, n_val=2, img=64)


def _small_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.SiLU(), nn.Conv2d(4, 2, 1)).train()


def test_compiled_run_trains_checkpoints_and_loads_without_compile(tmp_path, data):
    from yolotui.engine.model import build_model

    run_dir = make_run(tmp_path, "compiled", data=data, hyp=HYP, **{**RUN, "epochs": 1})
    done = run_trainer(run_dir, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    events = read_events(run_dir / "events.jsonl")
    compile_events = [e for e in events if e["type"] == "compile"]
    assert len(compile_events) == 1 and compile_events[0]["seconds"] > 0
    assert not [e for e in events if e["type"] == "warning" and e.get("kind") == "compile"]
    assert "compile: torch.compile" in done.stdout + done.stderr  # the compile time is in train.log too
    assert len(read_rows(run_dir / "results.csv")) == 1
    ckpt = load(run_dir / "weights" / "last.pt")
    assert not any("_orig_mod" in key for key in ckpt["model"])
    model = build_model(ckpt["model_yaml"], nc=int(ckpt["nc"]))  # no compile anywhere
    before = {k: v.clone() for k, v in model.state_dict().items()}
    model.load_state_dict(ckpt["model"])  # strict: the same keys as an uncompiled model
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items() if v.is_floating_point())
    model.eval()
    with torch.no_grad():
        decoded, _ = model(torch.rand(1, 3, 64, 64))
    assert torch.isfinite(decoded).all()


@pytest.mark.slow  # ~70 s with a cold compile cache (three compiled trainer processes); ~20 s warm
def test_sigkill_then_resume_with_compile_is_exact(tmp_path, data):
    reference = make_run(tmp_path, "ref", data=data, hyp=HYP, **RUN)
    done = run_trainer(reference, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_dir = make_run(tmp_path, "killed", data=data, hyp=HYP, **RUN)
    proc = start_trainer(run_dir)
    kill_after_mid_epoch_checkpoint(run_dir, proc, signal.SIGKILL, after_step=2, epoch=0)
    assert proc.returncode == -signal.SIGKILL
    resumed = run_trainer(run_dir, timeout=600)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "Resuming from" in resumed.stdout
    assert [e["type"] for e in read_events(run_dir / "events.jsonl")].count("compile") >= 2  # both processes
    ours, theirs = load(run_dir / "weights" / "last.pt"), load(reference / "weights" / "last.pt")
    assert_same_weights(ours, theirs)
    assert read_rows(run_dir / "results.csv") == read_rows(reference / "results.csv")


def test_trial_step_leaves_batchnorm_statistics_and_gradients_as_one_eager_step(monkeypatch):
    monkeypatch.setattr(compiled, "BACKEND", "eager")  # the trial's bookkeeping, without code generation
    eager, model = _small_model(), _small_model()
    for net in (eager, model):
        for p in net.parameters():
            p.grad = torch.full_like(p, 0.5)  # gradients accumulated before the step (resume mid-accumulation)
    x = torch.rand(2, 3, 8, 8)
    emitted = []
    forward = compiled.training_forward(model, True, emit=lambda type_, **f: emitted.append((type_, f)))
    out, ref = forward(x), eager(x)
    assert forward.state == "on" and emitted[0][0] == "compile" and emitted[0][1]["seconds"] >= 0
    assert torch.equal(out, ref)
    for (name, a), (_, b) in zip(model.state_dict().items(), eager.state_dict().items()):
        assert torch.equal(a, b), name  # running mean/var and num_batches_tracked moved by one step only
    assert all(torch.equal(p.grad, torch.full_like(p, 0.5)) for p in model.parameters())


def test_a_compiler_failure_falls_back_to_eager_with_a_warning(monkeypatch):
    def broken(*_args, **_kwargs):
        raise RuntimeError("no C++ compiler\nfound")

    monkeypatch.setattr(compiled.torch, "compile", broken)
    model = _small_model()
    emitted, logged = [], []
    forward = compiled.training_forward(model, True, emit=lambda type_, **f: emitted.append((type_, f)),
                                        log=logged.append)
    x = torch.rand(2, 3, 8, 8)
    out = forward(x)
    assert forward.state == "failed" and out.shape == (2, 2, 8, 8)
    (kind, fields), = emitted
    assert kind == "warning" and fields["kind"] == "compile"
    assert "no C++ compiler found" in fields["message"] and "training without it" in fields["message"]
    assert logged and "failed" in logged[0]
    forward(x)
    assert len(emitted) == 1  # not retried every step


def test_compile_off_calls_the_model_and_says_nothing():
    model = _small_model()
    emitted = []
    forward = compiled.training_forward(model, False, emit=lambda type_, **f: emitted.append(type_))
    x = torch.rand(2, 3, 8, 8)
    assert torch.equal(forward(x), _small_model()(x)) and forward.state == "off" and emitted == []


def test_compile_option_must_be_a_flag(tmp_path):
    from yolotui.config import default_options, validate_options
    from yolotui.errors import UserError

    with pytest.raises(UserError, match="--compile"):
        validate_options(default_options(cfg="gelan-t", data=str(make_data(tmp_path)), compile="yes"))


def test_train_flag_reaches_opt_yaml_and_the_attach_line_shows_the_compile_time():
    import argparse

    from yolotui.commands._progress import describe
    from yolotui.commands.train import add_training_flags, given_options
    from yolotui.config import TRAIN_DEFAULTS, opt_yaml_dict

    parser = argparse.ArgumentParser()
    add_training_flags(parser)
    assert given_options(parser.parse_args(["--compile"])) == {"compile": True}
    assert "compile" not in given_options(parser.parse_args([]))
    assert TRAIN_DEFAULTS["compile"] is False and opt_yaml_dict({"compile": True})["compile"] is True
    assert describe({"type": "compile", "seconds": 41.23}) == "model compiled (torch.compile) in 41.2s"
