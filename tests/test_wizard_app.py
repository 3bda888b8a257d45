"""The run actions in the app (Pilot): keys on the runs table and the dashboard open the wizards for the right run,
checkpoint-now / log / copy-path work, the command palette lists every action, keys are off inside a wizard."""

from __future__ import annotations

import contextlib

import pytest
from tui_fakes import FakeSampler, wait_until
from tui_fixtures import FIXED_NOW, standard_runs
from wizard_kit import CaptureLauncher

from yolotui.jobs.doctor import diagnose_run
from yolotui.tui.app import YolotuiApp
from yolotui.tui.screens.confirm_stop import ConfirmStopScreen
from yolotui.tui.screens.dashboard import DashboardScreen
from yolotui.tui.screens.wizard_finetune import FinetuneWizard
from yolotui.tui.screens.wizard_new_run import NewRunWizard
from yolotui.tui.screens.wizard_resume import ResumeWizard

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    made = standard_runs(tmp_path / "runs")
    yield made
    for run in made.values():
        run.release()


def make_app(launcher, run_dir=None) -> YolotuiApp:
    app = YolotuiApp(run_dir=run_dir, sampler=FakeSampler(), clock=lambda: FIXED_NOW, gpu_interval=None,
                     remember_theme=False)
    app.launcher = launcher
    app.run_diagnose = lambda path: diagnose_run(path, environment=False, logind=False)  # no torch probe here
    return app


async def home_loaded(pilot):
    assert await wait_until(pilot, lambda: pilot.app.home is not None and pilot.app.home.rows)
    await pilot.pause(0.1)


async def test_keys_on_the_runs_table_open_the_wizards_for_the_highlighted_run(runs):
    app = make_app(CaptureLauncher())
    async with app.run_test(size=(100, 30)) as pilot:
        await home_loaded(pilot)
        selected = app.home.selected_path()
        assert selected
        for key, screen_type in (("R", ResumeWizard), ("F", FinetuneWizard), ("x", ConfirmStopScreen)):
            await pilot.press(key)
            assert await wait_until(pilot, lambda t=screen_type: isinstance(app.screen, t)), key
            screen = app.screen
            if isinstance(screen, FinetuneWizard):
                assert screen.values["source"] == f"runs/{selected.rsplit('/', 1)[-1]}"
            else:
                assert str(screen.run_dir) == selected
            assert app.check_action("stop_run", ()) is False  # run keys are off inside a wizard
            await pilot.press("escape")
            assert await wait_until(pilot, lambda: app.screen is app.home), key
        await pilot.press("n")
        assert await wait_until(pilot, lambda: isinstance(app.screen, NewRunWizard))


async def test_new_run_launch_opens_the_dashboard(runs, tmp_path):
    target = runs["finished"].path
    launcher = CaptureLauncher(target)
    app = make_app(launcher)
    async with app.run_test(size=(100, 30)) as pilot:
        await home_loaded(pilot)
        await pilot.press("n")
        assert await wait_until(pilot, lambda: isinstance(app.screen, NewRunWizard))
        wizard = app.screen
        (tmp_path / "data").mkdir()
        from wizard_kit import make_data

        make_data(tmp_path / "data")
        from textual.widgets import Input

        wizard.query_one("#data", Input).value = "data/data.yaml"
        assert await wait_until(pilot, lambda: wizard.gpu_indices is not None and wizard.data_facts is not None)
        await pilot.press("ctrl+s")
        assert await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        assert app.screen.run_dir == target
    assert launcher.calls and launcher.calls[0][0] == "train"


async def test_dashboard_keys_checkpoint_copy_and_log(runs, monkeypatch):
    run_dir = runs["running"].path
    launcher = CaptureLauncher()
    app = make_app(launcher, run_dir)
    paged: list[list[str]] = []
    async with app.run_test(size=(100, 30)) as pilot:
        assert await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await pilot.press("c")
        assert await wait_until(pilot, lambda: launcher.calls == [["save", str(run_dir)]])
        await pilot.press("y")
        await pilot.pause(0.05)
        assert app.clipboard == str(run_dir)
        (run_dir / "train.log").write_text("epoch 1\n")
        monkeypatch.setenv("PAGER", "most -s")
        monkeypatch.setattr(app, "suspend", contextlib.nullcontext)  # headless: nothing to hand the terminal to
        monkeypatch.setattr(app, "run_in_terminal", lambda argv: paged.append(argv) or 0)
        await pilot.press("l")
        await pilot.pause(0.05)
        assert paged == [["most", "-s", str(run_dir / "train.log")]]
        await pilot.press("R")
        assert await wait_until(pilot, lambda: isinstance(app.screen, ResumeWizard))
        assert app.screen.run_dir == run_dir


async def test_log_without_a_terminal_to_suspend_says_so(runs):
    app = make_app(CaptureLauncher(), runs["running"].path)
    (runs["running"].path / "train.log").write_text("x\n")
    async with app.run_test(size=(100, 30)) as pilot:
        assert await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await pilot.press("l")  # the headless driver cannot suspend: a notification, no crash
        await pilot.pause(0.1)
        assert any("yolotui logs" in str(n.message) for n in app._notifications)


async def test_palette_lists_every_action(runs):
    app = make_app(CaptureLauncher(), runs["running"].path)
    async with app.run_test(size=(100, 30)) as pilot:
        assert await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        titles = [command.title for command in app.get_system_commands(app.screen)]
    for title in ("New run", "Fine-tune", "Resume or extend shapes-running", "Fine-tune from shapes-running",
                  "Stop shapes-running", "Checkpoint now: shapes-running", "Log of shapes-running in $PAGER",
                  "Copy path of shapes-running"):
        assert title in titles, title


async def test_footer_keys_and_run_keys_need_a_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = make_app(CaptureLauncher())
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.3)
        assert app.check_action("new_run", ()) is True
        assert app.check_action("resume_run", ()) is False  # no runs: nothing to resume
        shown = {b.binding.key for b in app.screen.active_bindings.values() if b.binding.show and b.enabled}
        assert "n" in shown
