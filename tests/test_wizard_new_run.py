"""New-run wizard (Pilot): the command line it shows is the one it runs; each bad input shows its inline error
on the field and launches nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input, Select, Static
from tui_fakes import FakeSampler, rendered, wait_until
from wizard_kit import CaptureLauncher, HostApp, make_data, write_tiny_cfg

from yolotui.tui.actions import format_command
from yolotui.tui.screens.wizard_new_run import MODEL_PATH, NewRunWizard

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    make_data(tmp_path / "data")
    write_tiny_cfg(tmp_path)
    return tmp_path


def host(launcher, **kwargs) -> HostApp:
    values = {"data": "data/data.yaml", **kwargs.pop("values", {})}
    return HostApp(lambda: NewRunWizard(launcher, sampler=kwargs.pop("sampler", FakeSampler()), values=values,
                                        **kwargs))


async def ready(pilot) -> NewRunWizard:
    wizard = pilot.app.wizard
    assert await wait_until(pilot, lambda: wizard.gpu_indices is not None and wizard.data_facts is not None)
    return wizard


def set_value(wizard, widget_id: str, value: str) -> None:
    wizard.query_one(f"#{widget_id}", Input).value = value


def error_text(wizard, field_id: str) -> str:
    return rendered(wizard.query_one(f"#{field_id}-error", Static))


async def test_launch_runs_the_command_it_shows_and_opens_the_run(workdir):
    launcher = CaptureLauncher(workdir / "runs" / "train" / "exp")
    app = host(launcher)
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = await ready(pilot)
        assert "5 classes (circle" in rendered(wizard.query_one("#data-hint", Static))
        assert "train 4" in rendered(wizard.query_one("#data-hint", Static))
        assert wizard.query_one("#device", Input).value == "0"  # the fake H200, the GPU with free memory
        shown = rendered(wizard.query_one("#command", Static))
        await pilot.press("ctrl+s")
        assert await wait_until(pilot, lambda: app.results)
    expected = ["train", "--cfg", "yolov9-s", "--data", "data/data.yaml", "--epochs", "100", "--batch-size", "16",
                "--img", "640", "--device", "0", "--name", "exp"]
    assert launcher.calls == [expected]
    assert format_command(expected) in shown.replace("\n", " ")
    assert app.results == [workdir / "runs" / "train" / "exp"]


async def test_keyboard_only_fill_in_with_a_model_path(workdir):
    launcher = CaptureLauncher(workdir / "runs" / "train" / "tiny")
    app = host(launcher, sampler=FakeSampler(gpu=False), values={"data": ""})
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = app.wizard
        assert await wait_until(pilot, lambda: wizard.gpu_indices is not None)
        assert wizard.query_one("#device", Input).value == "cpu"  # no GPU: the CPU
        wizard.query_one("#model", Select).value = MODEL_PATH
        await pilot.pause()
        wizard.query_one("#model-path", Input).focus()
        await pilot.press(*"tiny.y", "tab")  # Tab completes the file name
        assert wizard.query_one("#model-path", Input).value == "tiny.yaml"
        await pilot.press("tab")  # no completion left: next field
        assert wizard.focused.id == "data"
        await pilot.press(*"data/da", "tab")
        assert wizard.query_one("#data", Input).value == "data/data.yaml"
        await pilot.press("enter")  # Enter moves on too
        assert wizard.focused.id == "epochs"
        await pilot.press("ctrl+a", "ctrl+k", *"2", "tab", "ctrl+a", "ctrl+k", "4", "tab", "ctrl+a", "ctrl+k",
                          *"64", "tab", "tab", *"", "tab")
        set_value(wizard, "workers", "0")
        set_value(wizard, "name", "tiny")
        await pilot.press("ctrl+s")
        assert await wait_until(pilot, lambda: app.results)
    assert launcher.calls == [["train", "--cfg", "tiny.yaml", "--data", "data/data.yaml", "--epochs", "2",
                               "--batch-size", "4", "--img", "64", "--device", "cpu", "--workers", "0",
                               "--name", "tiny"]]


BAD_INPUTS = [  # (field, bad value, words of its inline error, a good value)
    ("data", "data/missing.yaml", "no such file", "data/data.yaml"),
    ("data", "data/broken.yaml", "broken.yaml", "data/data.yaml"),
    ("data", "data/nameless.yaml", "'names' is missing", "data/data.yaml"),
    ("data", "data", "is a folder", "data/data.yaml"),
    ("name", "taken", "exists already", "fresh"),
    ("name", "a/b", "path separator", "fresh"),
    ("device", "3", "GPU 3 is not there", "0"),
    ("device", "gpu", "not a device", "cpu"),
    ("epochs", "0", "must be at least 1", "3"),
    ("batch", "many", "not a whole number", "8"),
    ("imgsz", "-5", "must be at least 1", "64"),
    ("workers", "-1", "must be at least 0", "0"),
    ("model-path", "nowhere.yaml", "no such file", "tiny.yaml"),
    ("model-path", "data/data.yaml", "not a model YAML", "tiny.yaml"),
    ("hyp", "nowhere-hyp.yaml", "nowhere-hyp.yaml", ""),
]


async def test_each_bad_input_shows_its_inline_error_and_launches_nothing(workdir):
    (workdir / "data" / "broken.yaml").write_text("train: [unclosed\n")
    (workdir / "data" / "nameless.yaml").write_text("train: images/train\nval: images/val\n")
    (workdir / "runs" / "train" / "taken").mkdir(parents=True)
    launcher = CaptureLauncher(workdir / "runs" / "train" / "fresh")
    app = host(launcher)
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = await ready(pilot)
        wizard.query_one("#model", Select).value = MODEL_PATH
        set_value(wizard, "model-path", "tiny.yaml")
        await pilot.pause()
        for field_id, bad, message, good in BAD_INPUTS:
            set_value(wizard, field_id, bad)
            await pilot.pause(0.05)
            await pilot.press("ctrl+s")
            await pilot.pause(0.05)
            case = f"{field_id}={bad!r}"
            assert message in error_text(wizard, field_id), case
            assert wizard.query_one(f"#{field_id}-error").has_class("-shown"), case
            assert wizard.query_one(f"#{field_id}", Input).has_class("-invalid"), case
            assert "1 field to fix: nothing was launched" in rendered(wizard.query_one("#status", Static)), case
            assert launcher.calls == [] and app.results == [], case
            assert app.screen is wizard and wizard.focused is not None and wizard.focused.id == field_id, case
            set_value(wizard, field_id, good)  # fixing the field clears its error
            assert await wait_until(pilot, lambda f=field_id: not wizard.query_one(f"#{f}-error").has_class("-shown")), case
        await pilot.press("ctrl+s")
        assert await wait_until(pilot, lambda: app.results)
    assert launcher.calls == [["train", "--cfg", "tiny.yaml", "--data", "data/data.yaml", "--epochs", "3",
                               "--batch-size", "8", "--img", "64", "--device", "cpu", "--workers", "0",
                               "--name", "fresh"]]


async def test_several_bad_fields_are_all_marked(workdir):
    launcher = CaptureLauncher()
    app = host(launcher)
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = await ready(pilot)
        set_value(wizard, "epochs", "x")
        set_value(wizard, "device", "7")
        await pilot.press("ctrl+s")
        await pilot.pause(0.05)
        assert "2 fields to fix" in rendered(wizard.query_one("#status", Static))
        assert error_text(wizard, "epochs") and error_text(wizard, "device")
        assert wizard.focused.id == "epochs"  # the first field to fix
    assert launcher.calls == []


async def test_data_yaml_is_checked_as_typed(workdir):
    app = host(CaptureLauncher(), values={"data": ""})
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = app.wizard
        set_value(wizard, "data", "data/nope.yaml")
        assert await wait_until(pilot, lambda: "no such file" in error_text(wizard, "data"))
        set_value(wizard, "data", "data/data.yaml")
        assert await wait_until(pilot, lambda: "5 classes" in rendered(wizard.query_one("#data-hint", Static)))
        assert not wizard.query_one("#data-error").has_class("-shown")


async def test_cli_failure_is_shown_and_the_wizard_stays(workdir):
    launcher = CaptureLauncher(error="--cfg: no such model")
    app = host(launcher)
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = await ready(pilot)
        await pilot.press("ctrl+s")
        assert await wait_until(pilot, lambda: "failed: --cfg: no such model" in
                                rendered(wizard.query_one("#status", Static)))
        assert app.screen is wizard and app.results == []


async def test_escape_cancels_without_launching(workdir):
    launcher = CaptureLauncher()
    app = host(launcher)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("escape")
        assert await wait_until(pilot, lambda: app.results == [None])
    assert launcher.calls == []


async def test_default_name_is_free(workdir):
    (workdir / "runs" / "train" / "exp").mkdir(parents=True)
    app = host(CaptureLauncher())
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = await ready(pilot)
        assert wizard.query_one("#name", Input).value == "exp2"


async def test_the_wizard_can_queue_the_run(workdir):
    from tui_fixtures import make_run

    make_run(workdir / "runs" / "other", "first", state="running")
    launcher = CaptureLauncher(workdir / "runs" / "train" / "exp")
    app = host(launcher, values={"after": "no-such-run", "when_free": "lots"})
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = await ready(pilot)
        await pilot.press("ctrl+s")
        await pilot.pause(0.05)
        assert "no-such-run" in error_text(wizard, "after") and "lots" in error_text(wizard, "when-free")
        assert launcher.calls == []
        set_value(wizard, "after", "first")
        set_value(wizard, "when-free", "idle")
        await pilot.pause(0.05)
        await pilot.press("ctrl+s")
        assert await wait_until(pilot, lambda: app.results)
    assert launcher.calls[0][-4:] == ["exp", "--after", "first", "--when-free"]
