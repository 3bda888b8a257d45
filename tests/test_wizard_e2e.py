"""End to end through the real CLI: a tiny run launched from the new-run wizard, SIGKILLed (supervisor and
trainer) mid-training, resumed from the resume wizard, finishes; a fine-tune launched from its wizard trains with
the backbone frozen. Every process is cleaned up, whatever happens."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import yaml
from textual.widgets import Input, Select
from tui_fakes import FakeSampler
from wizard_kit import make_data, write_tiny_cfg

from yolotui.runs import lock
from yolotui.runs.events import read_events
from yolotui.runs.status import effective_state, read_status
from yolotui.tui.app import YolotuiApp
from yolotui.tui.screens.dashboard import DashboardScreen
from yolotui.tui.screens.wizard_finetune import FinetuneWizard
from yolotui.tui.screens.wizard_new_run import MODEL_PATH, NewRunWizard
from yolotui.tui.screens.wizard_resume import RESUME, ResumeWizard

pytestmark = pytest.mark.anyio
FAST_HYP = {"warmup_epochs": 0.0, "mosaic": 0.0, "mixup": 0.0, "scale": 0.1, "translate": 0.05}


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_run(run_dir: Path) -> None:
    status = read_status(run_dir)
    if status is None:
        return
    for pid in (status.trainer_pid, status.supervisor_pid):
        if _alive(pid):
            try:
                os.killpg(pid, signal.SIGKILL) if pid == status.trainer_pid else os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A working folder with tiny data, the tiny model and a quick hyp; every run under it is killed at the end."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("YOLOTUI_TORCH_THREADS", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    # The first attempt sleeps before every batch (resumed ones do not): a loaded machine cannot run it to its
    # end between the test seeing epoch 1's checkpoint and its SIGKILL.
    monkeypatch.setenv("YOLOTUI_STEP_DELAY_S", "4")
    data = make_data(tmp_path / "data", n_train=16, n_val=4, img=64)
    three = yaml.safe_load(data.read_text())
    three["names"] = ["a", "b", "c"]
    three.pop("nc", None)
    (data.parent / "three.yaml").write_text(yaml.safe_dump(three))
    write_tiny_cfg(tmp_path)
    from yolotui.config import load_hyp
    from yolotui.configs import resolve_hyp

    (tmp_path / "quick-hyp.yaml").write_text(yaml.safe_dump({**load_hyp(resolve_hyp(None)), **FAST_HYP}))
    yield tmp_path
    for run_dir in (tmp_path / "runs" / "train").glob("*"):
        _kill_run(run_dir)


async def _wait_for(pilot, predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        await pilot.pause(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _log(run_dir: Path) -> str:
    path = run_dir / "train.log"
    return path.read_text(errors="replace")[-3000:] if path.exists() else "(no train.log)"


async def _new_run(pilot, name: str, epochs: int) -> Path:
    app = pilot.app
    await pilot.press("n")
    await _wait_for(pilot, lambda: isinstance(app.screen, NewRunWizard), 10, "the new-run wizard")
    wizard = app.screen
    wizard.query_one("#model", Select).value = MODEL_PATH
    await pilot.pause()
    for widget_id, value in (("model-path", "tiny.yaml"), ("data", "data/data.yaml"), ("epochs", str(epochs)),
                             ("batch", "64"), ("imgsz", "64"), ("hyp", "quick-hyp.yaml"), ("workers", "0"),
                             ("name", name)):
        wizard.query_one(f"#{widget_id}", Input).value = value
    await _wait_for(pilot, lambda: wizard.gpu_indices is not None and wizard.data_facts is not None, 20, "checks")
    wizard.query_one("#device", Input).value = "cpu"
    await pilot.press("ctrl+s")
    run_dir = (Path("runs") / "train" / name).resolve()
    await _wait_for(pilot, lambda: isinstance(app.screen, DashboardScreen), 90, "the dashboard of the new run")
    assert app.screen.run_dir.resolve() == run_dir
    assert wizard.launched == [["train", "--cfg", "tiny.yaml", "--data", "data/data.yaml", "--epochs", str(epochs),
                                "--batch-size", "64", "--img", "64", "--device", "cpu", "--workers", "0",
                                "--hyp", "quick-hyp.yaml", "--name", name]]
    return run_dir


def _checkpoint_at(run_dir: Path, epoch: int) -> bool:
    return any(e.get("type") == "checkpoint" and int(e.get("epoch", 0)) >= epoch and "last.pt" in str(e.get("path"))
               for e in read_events(run_dir / "events.jsonl"))


async def _launch_kill_resume(pilot, epochs: int) -> Path:
    """New run from the wizard, SIGKILL of its supervisor and trainer after epoch 1, resume from the wizard,
    wait for it to finish; returns the run folder."""
    app = pilot.app
    # The tiny model, one batch an epoch (batch 64 = the nominal batch, so every batch is an optimizer step).
    run_dir = await _new_run(pilot, "e2e", epochs=epochs)
    await _wait_for(pilot, lambda: _checkpoint_at(run_dir, 1), 180, f"epoch 1's checkpoint\n{_log(run_dir)}")

    # SIGKILL the supervisor and the trainer: the run is interrupted, nothing is left running.
    status = read_status(run_dir)
    assert status is not None and _alive(status.supervisor_pid) and _alive(status.trainer_pid)
    os.kill(status.supervisor_pid, signal.SIGKILL)
    os.killpg(status.trainer_pid, signal.SIGKILL)
    await _wait_for(pilot, lambda: not _alive(status.trainer_pid) and not lock.is_held(run_dir), 30,
                    "the killed run to release its lock")
    assert effective_state(run_dir) == "interrupted"

    # Resume from the resume wizard: the diagnosis says resumable, "resume as is" is chosen, it finishes.
    await pilot.press("R")
    await _wait_for(pilot, lambda: isinstance(app.screen, ResumeWizard), 10, "the resume wizard")
    wizard = app.screen
    await _wait_for(pilot, lambda: wizard.facts is not None and wizard.selected() is not None, 120, "the diagnosis")
    assert wizard.facts.diagnosis.last.verdict == "resumable", wizard.facts
    assert wizard.facts.diagnosis.state == "interrupted"  # the supervisor died with it: no exit on record
    assert wizard.selected().key == RESUME
    await pilot.press("ctrl+s")
    await _wait_for(pilot, lambda: isinstance(app.screen, DashboardScreen) and wizard.launched, 60,
                    "the resumed run's dashboard")
    assert wizard.launched == [["resume", "runs/train/e2e"]]
    await _wait_for(pilot, lambda: effective_state(run_dir) == "finished", 240,
                    f"the resumed run to finish\n{_log(run_dir)}")
    starts = [e for e in read_events(run_dir / "events.jsonl") if e.get("type") == "start"]
    assert starts[-1]["resumed_from"] and starts[-1]["resumed_from"]["epoch"] >= 1
    done = [e["epoch"] for e in read_events(run_dir / "events.jsonl") if e.get("type") == "epoch"]
    assert done == list(range(epochs))  # no epoch counted twice
    return run_dir


async def test_new_run_killed_and_resumed_from_the_wizard_finishes(workdir):
    """The reduced end-to-end run (default suite): no environment probe in the diagnosis, 3 epochs."""
    from yolotui.jobs.doctor import diagnose_run

    app = YolotuiApp(sampler=FakeSampler(gpu=False), gpu_interval=None, remember_theme=False)
    app.run_diagnose = lambda path: diagnose_run(path, environment=False, logind=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await _launch_kill_resume(pilot, epochs=3)


@pytest.mark.slow
async def test_new_run_killed_resumed_and_finetuned_with_frozen_backbone(workdir):
    """The full run: the real diagnosis (environment probe included), then a fine-tune from its wizard."""
    app = YolotuiApp(sampler=FakeSampler(gpu=False), gpu_interval=None, remember_theme=False)
    async with app.run_test(size=(100, 30)) as pilot:
        run_dir = await _launch_kill_resume(pilot, epochs=6)

        # Fine-tune from its wizard on 3 classes, backbone frozen (the default), 2 epochs.
        await pilot.press("F")
        await _wait_for(pilot, lambda: isinstance(app.screen, FinetuneWizard), 10, "the fine-tune wizard")
        ft = app.screen
        ft.query_one("#data", Input).value = "data/three.yaml"
        ft.query_one("#epochs", Input).value = "2"
        await _wait_for(pilot, lambda: {"source", "data"} <= set(ft.checked) and ft.checked["data"][1] is not None,
                        30, "the fine-tune checks")
        assert ft.freeze_mode() == "backbone"
        await pilot.press("ctrl+s")
        ft_dir = (Path("runs") / "train" / "e2e-ft").resolve()
        await _wait_for(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.run_dir.resolve()
                        == ft_dir, 60, "the fine-tune's dashboard")
        assert ft.launched[0][:2] == ["finetune", "--from"] and "--freeze" in ft.launched[0]
        await _wait_for(pilot, lambda: effective_state(ft_dir) == "finished", 240,
                        f"the fine-tune to finish\n{_log(ft_dir)}")

    start = next(e for e in read_events(ft_dir / "events.jsonl") if e.get("type") == "start")
    assert start["frozen"] > 0
    assert "Froze" in _log(ft_dir)
    import torch

    source_path = run_dir / "weights" / "best.pt"  # what `finetune --from RUN` takes: best.pt, else last.pt
    source_path = source_path if source_path.exists() else run_dir / "weights" / "last.pt"
    assert start["transfer"]["transferred"] > 0
    source = torch.load(source_path, map_location="cpu", weights_only=True)
    tuned = torch.load(ft_dir / "weights" / "last.pt", map_location="cpu", weights_only=True)
    assert tuned["nc"] == 3
    backbone = [k for k in tuned["model"] if k.startswith("model.0.") and k.endswith("conv.weight")]
    assert backbone
    for key in backbone:  # frozen: the backbone's weights are the source's
        assert torch.equal(tuned["model"][key], source["ema"][key]), key
    head = [k for k in tuned["model"] if k.startswith("model.5.") and k.endswith("weight")
            and k in source["ema"] and tuned["model"][k].shape == source["ema"][k].shape]
    assert any(not torch.equal(tuned["model"][k], source["ema"][k]) for k in head)  # the head trained
