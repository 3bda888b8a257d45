"""Wizards and the ultralytics backend (Pilot; the interpreter probe is injected): the new-run wizard for
ultralytics runs the `yolotui train --backend ultralytics` line it shows and refuses a bad interpreter or extra
argument; the resume wizard offers an ultralytics run only what ultralytics can do; the fine-tune wizard
fine-tunes an ultralytics run with ultralytics; the palette reaches the new wizard."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from textual.widgets import Input, Static
from tui_fakes import rendered, wait_until
from wizard_kit import CaptureLauncher, HostApp, fake_diagnosis, make_data, make_plain_run

from yolotui.errors import UserError
from yolotui.tui.actions import format_command
from yolotui.tui.screens.wizard_resume import EXTEND, FINETUNE, FROM, RESUME, ResumeFacts, resume_choices
from yolotui.tui.screens.wizard_ultralytics import UltralyticsNewRunWizard

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def good_probe(python):
    return [f"trainer: {python} (Python 3.11, ultralytics 8.4, torch 2.14)"]


def bad_probe(python):
    raise UserError(f"ultralytics is not installed in {python}: install it there")


async def test_the_ultralytics_wizard_runs_the_command_it_shows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_data(tmp_path / "data")
    launcher = CaptureLauncher(tmp_path / "runs" / "detect" / "train")
    app = HostApp(lambda: UltralyticsNewRunWizard(launcher, probe=good_probe,
                                                  values={"data": "data/data.yaml", "epochs": "3", "batch": "4",
                                                          "imgsz": "64", "extra": "lr0=0.002 plots=False"}))
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = app.wizard
        assert await wait_until(pilot, lambda: wizard.python_facts is not None)
        assert "ultralytics 8.4" in rendered(wizard.query_one("#python-hint", Static))
        shown = rendered(wizard.query_one("#command", Static))
        await pilot.press("ctrl+s")
        assert await wait_until(pilot, lambda: app.results)
    expected = ["train", "--backend", "ultralytics", "--model", "yolov9t.yaml", "--data", "data/data.yaml",
                "--epochs", "3", "--batch-size", "4", "--imgsz", "64", "--project", "runs/detect", "--name", "train",
                "lr0=0.002", "plots=False"]
    assert launcher.calls == [expected]
    assert format_command(expected) in shown.replace("\n", " ")
    assert not any(flag in expected for flag in ("--hyp", "--after", "--when-free", "--slurm"))


async def test_a_python_without_ultralytics_or_a_stray_argument_launches_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_data(tmp_path / "data")
    launcher = CaptureLauncher()
    app = HostApp(lambda: UltralyticsNewRunWizard(launcher, probe=bad_probe,
                                                  values={"data": "data/data.yaml", "extra": "lr0 0.002"}))
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = app.wizard
        assert await wait_until(pilot, lambda: wizard.python_facts is not None)
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "not installed" in rendered(wizard.query_one("#python-error", Static))
        assert "not key=value" in rendered(wizard.query_one("#extra-error", Static))
        wizard.query_one("#extra", Input).value = "lr0=0.002"
        await pilot.pause()
        assert "not key=value" not in rendered(wizard.query_one("#extra-error", Static))
    assert launcher.calls == []


def test_resume_choices_of_an_ultralytics_run_leave_out_other_checkpoints(tmp_path):
    run = make_plain_run(tmp_path / "exp")

    def choices(kind):
        facts = ResumeFacts(fake_diagnosis(run, kind), 16, [], backend="ultralytics")
        return [(c.key, c.checkpoint) for c in resume_choices(facts)]

    assert choices("finished") == [(EXTEND, None), (FINETUNE, None)]
    assert FROM not in [key for key, _ in choices("corrupt")]
    assert choices("corrupt")[0] == (RESUME, None)  # start over with the original ultralytics command
    assert "ultralytics" in resume_choices(ResumeFacts(fake_diagnosis(run, "corrupt"), 16, [],
                                                       backend="ultralytics"))[0].label


async def test_the_finetune_wizard_fine_tunes_an_ultralytics_run_with_ultralytics(tmp_path, monkeypatch):
    from yolotui.tui import wizard_checks
    from yolotui.tui.screens.wizard_finetune import FinetuneWizard

    monkeypatch.chdir(tmp_path)
    data = make_data(tmp_path / "data")
    run = tmp_path / "runs" / "detect" / "train"
    (run / "weights").mkdir(parents=True)
    (run / "run.yaml").write_text(yaml.safe_dump({"backend": "ultralytics", "command": ["python"], "name": "train"}))
    plain = make_plain_run(tmp_path / "runs" / "train" / "exp")
    facts = {str(run): wizard_checks.SourceFacts(str(run / "weights" / "best.pt"), str(run), 5, 23, 10, 2),
             str(plain): wizard_checks.SourceFacts(str(plain / "weights" / "best.pt"), str(plain), 5, 23, 10, 2)}
    def fake_facts(value):  # no checkpoint to scan here
        return facts[str(Path(value).resolve())]

    monkeypatch.setattr(wizard_checks, "source_facts", fake_facts)
    monkeypatch.setitem(FinetuneWizard.CHECKERS, "source", fake_facts)
    for source, backend in ((run, ["--backend", "ultralytics"]), (plain, [])):
        app = HostApp(lambda source=source: FinetuneWizard(str(source), CaptureLauncher(), values={"data": str(data)}))
        async with app.run_test(size=(80, 24)) as pilot:
            wizard = app.wizard
            assert await wait_until(pilot, lambda wizard=wizard: "source" in wizard.checked)
            args = wizard.command_args()
        assert args[:2] == ["finetune", "--from"] and Path(args[2]).resolve() == source
        assert wizard.checked["source"][2] is None
        assert [a for a in args if a in ("--backend", "ultralytics")] == backend


async def test_the_palette_opens_the_ultralytics_wizard(tmp_path, monkeypatch):
    from tui_fakes import FakeSampler

    from yolotui.tui.app import YolotuiApp

    monkeypatch.chdir(tmp_path)
    app = YolotuiApp(sampler=FakeSampler(), gpu_interval=None, remember_theme=False)
    app.launcher = CaptureLauncher()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.3)
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        assert "New ultralytics run" in commands
        commands["New ultralytics run"].callback()
        assert await wait_until(pilot, lambda: isinstance(app.screen, UltralyticsNewRunWizard)
                                and app.screen.python_facts is not None)  # mounted, its interpreter probed
        assert Path(app.screen.project) == Path("runs/detect")
        assert app.screen.python_facts[1] is None  # this interpreter has ultralytics
