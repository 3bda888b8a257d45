"""Fine-tune wizard (Pilot): defaults (backbone frozen, 30 epochs, lr scale 0.1), the command it runs, and each bad
input (missing source or data, a head frozen with another class count, bad numbers, a name that exists)."""

from __future__ import annotations

import pytest
from textual.widgets import Input, RadioSet, Static
from tui_fakes import rendered, wait_until
from wizard_kit import CaptureLauncher, HostApp, data_with_classes, make_data, make_source_run

from yolotui.tui import wizard_checks as checks
from yolotui.tui.screens.wizard_finetune import FinetuneWizard

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = make_data(tmp_path / "data")  # 5 classes
    data_with_classes(data, 3, "three.yaml")
    make_source_run(tmp_path / "runs" / "src", nc=3)
    return tmp_path


def host(launcher, source="runs/src", **values):
    return HostApp(lambda: FinetuneWizard(source, launcher, values=values))


async def ready(pilot) -> FinetuneWizard:
    wizard = pilot.app.wizard
    assert await wait_until(pilot, lambda: {"source", "data"} <= set(wizard.checked), timeout=15)
    await pilot.pause()
    return wizard


def set_value(wizard, widget_id, value):
    wizard.query_one(f"#{widget_id}", Input).value = value


def error_text(wizard, field_id):
    return rendered(wizard.query_one(f"#{field_id}-error", Static))


def test_source_facts_read_the_checkpoint_and_model(workdir):
    facts = checks.source_facts("runs/src")
    assert facts.checkpoint.endswith("best.pt") and facts.nc == 3
    assert (facts.layers, facts.backbone_layers, facts.head_index) == (6, 5, 5)
    assert checks.check_freeze("backbone", "", facts, 5) == "backbone"
    assert checks.check_freeze("layers", "5", facts, 5) == "5"  # backbone only: fine with a new class count
    assert checks.check_freeze("layers", "6", facts, 3) == "6"  # head frozen, same classes: fine
    with pytest.raises(Exception, match="freezes the detection head"):
        checks.check_freeze("layers", "6", facts, 5)


async def test_defaults_and_launch(workdir):
    launcher = CaptureLauncher(workdir / "runs" / "src-ft")
    app = host(launcher, data="data/data.yaml")
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = await ready(pilot)
        assert wizard.freeze_mode() == "backbone"
        assert wizard.query_one("#epochs", Input).value == "30"
        assert wizard.query_one("#lr-scale", Input).value == "0.1"
        assert wizard.query_one("#name", Input).value == "src-ft"
        hint = rendered(wizard.query_one("#source-hint", Static))
        assert "best.pt" in hint and "3 classes" in hint and "6 layers, backbone 5" in hint
        await pilot.press("ctrl+s")
        assert await wait_until(pilot, lambda: app.results)
    assert launcher.calls == [["finetune", "--from", "runs/src", "--data", "data/data.yaml", "--freeze", "backbone",
                               "--epochs", "30", "--lr-scale", "0.1", "--name", "src-ft"]]
    assert app.results == [workdir / "runs" / "src-ft"]


async def test_freeze_n_layers_by_keyboard(workdir):
    launcher = CaptureLauncher(workdir / "runs" / "src-ft")
    app = host(launcher, data="data/three.yaml")
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = await ready(pilot)
        wizard.query_one("#freeze", RadioSet).focus()
        await pilot.press("down", "enter")
        assert wizard.freeze_mode() == "layers"
        assert wizard.query_one("#layers-field").display
        set_value(wizard, "layers", "6")  # the head too: allowed, the class count matches the source's
        await pilot.press("ctrl+s")
        assert await wait_until(pilot, lambda: app.results)
    assert launcher.calls[0][5:7] == ["--freeze", "6"]


BAD_INPUTS = [  # (field, bad value, words of the inline error, good value)
    ("source", "runs/nothing", "no run folder or indexed run", "runs/src"),
    ("data", "data/none.yaml", "no such file", "data/data.yaml"),
    ("data", "data/broken.yaml", "broken.yaml", "data/data.yaml"),
    ("layers", "6", "freezes the detection head (layer 5)", "4"),
    ("layers", "9", "has only 6", "4"),
    ("epochs", "0", "at least 1", "30"),
    ("lr-scale", "0", "must be above 0", "0.1"),
    ("lr-scale", "fast", "not a number", "0.1"),
    ("name", "src", "exists already", "src-ft"),
]


async def test_each_bad_input_shows_its_inline_error_and_launches_nothing(workdir):
    (workdir / "data" / "broken.yaml").write_text("names: [a\n")
    launcher = CaptureLauncher(workdir / "runs" / "src-ft")
    app = host(launcher, data="data/data.yaml", freeze="layers")  # 5 classes, the source has 3
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = await ready(pilot)
        for field_id, bad, words, good in BAD_INPUTS:
            set_value(wizard, field_id, bad)
            await pilot.pause(0.05)
            await pilot.press("ctrl+s")
            await pilot.pause(0.05)
            case = f"{field_id}={bad!r}"
            assert words in error_text(wizard, field_id), (case, error_text(wizard, field_id))
            assert "nothing was launched" in rendered(wizard.query_one("#status", Static)), case
            assert launcher.calls == [] and app.results == [], case
            set_value(wizard, field_id, good)
            await pilot.pause(0.05)
            await wait_until(pilot, lambda f=field_id: f not in ("source", "data") or wizard.checked[f][0] == good)
        await pilot.press("ctrl+s")
        assert await wait_until(pilot, lambda: app.results)
    assert launcher.calls == [["finetune", "--from", "runs/src", "--data", "data/data.yaml", "--freeze", "4",
                               "--epochs", "30", "--lr-scale", "0.1", "--name", "src-ft"]]


async def test_empty_source_and_data_are_errors(workdir):
    launcher = CaptureLauncher()
    app = HostApp(lambda: FinetuneWizard(None, launcher))
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = app.wizard
        await pilot.pause(0.1)
        await pilot.press("ctrl+s")
        await pilot.pause(0.05)
        assert "give a run" in error_text(wizard, "source")
        assert "data.yaml" in error_text(wizard, "data")
        assert wizard.focused.id == "source"
    assert launcher.calls == []
