"""The TUI side of the mirror: the restore screen (Pilot, a capturing launcher) runs `yolotui restore ... --json` and
closes with the restored folder, keeps a refusal on screen, starts from settings.yaml's mirror; the dashboard's
restart panel shows how the mirror fares; the palette offers the restore."""

from __future__ import annotations

import pytest
from spotkit import write_settings
from textual.widgets import Input, Static
from tui_fakes import rendered, wait_until
from wizard_kit import CaptureLauncher, HostApp

from yolotui.runs.status import RunStatus
from yolotui.tui.runview import RunView
from yolotui.tui.screens.restore_mirror import RestoreScreen

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def test_restore_screen_runs_restore_and_opens_the_run(tmp_path):
    restored = tmp_path / "runs" / "train" / "exp"
    launcher = CaptureLauncher(run_dir=restored)
    app = HostApp(lambda: RestoreScreen(launcher, source="", project="runs/train"))
    async with app.run_test(size=(90, 24)) as pilot:
        await pilot.pause()
        screen = app.wizard
        await pilot.press(*"box:/data/mirror/exp")
        assert "yolotui restore box:/data/mirror/exp --project runs/train" in rendered(screen.query_one("#command", Static))
        await pilot.press("enter")
        assert await wait_until(pilot, lambda: app.results == [restored])
    assert launcher.calls == [["restore", "box:/data/mirror/exp", "--project", "runs/train", "--json"]]


async def test_a_refused_restore_stays_on_screen_with_its_line(tmp_path):
    launcher = CaptureLauncher(error="runs/train/exp is a live run (its supervisor): refusing to restore over it")
    app = HostApp(lambda: RestoreScreen(launcher, source="s3://bucket/runs/exp"))
    async with app.run_test(size=(90, 24)) as pilot:
        await pilot.pause()
        await pilot.press("enter")
        screen = app.wizard
        assert await wait_until(pilot, lambda: "refusing to restore" in rendered(screen.query_one("#status", Static)))
        assert app.results == [] and app.screen is screen
        await pilot.press("escape")
        assert await wait_until(pilot, lambda: app.results == [None])
    assert len(launcher.calls) == 1


async def test_the_source_starts_from_the_settings_mirror(tmp_path, yolotui_home):
    write_settings(yolotui_home, {"mirror": {"target": "s3://bucket/runs"}})
    app = HostApp(lambda: RestoreScreen(CaptureLauncher()))
    async with app.run_test(size=(90, 24)) as pilot:
        await pilot.pause()
        assert app.wizard.query_one("#source", Input).value == "s3://bucket/runs/"
        await pilot.press("enter")  # no run name yet: said, nothing run
        assert await wait_until(pilot, lambda: "TARGET/RUN_NAME" in rendered(app.wizard.query_one("#status", Static)))


async def test_the_restart_panel_shows_the_mirror(tmp_path):
    from textual.app import App

    from yolotui.tui.widgets.panels import RestartPanel

    class PanelApp(App):
        def compose(self):
            yield RestartPanel(id="restarts")

    status = RunStatus(name="exp", state="running", mirror={
        "target": "s3://bucket/runs", "state": "failing", "failures": 3, "last_error": "s3://bucket/runs/exp: "
        "cannot upload weights/last.pt (AccessDenied)", "last_ok": None})
    app = PanelApp()
    async with app.run_test(size=(120, 10)) as pilot:
        panel = app.query_one(RestartPanel)
        panel.show(RunView(str(tmp_path), "exp", "running", status=status))
        await pilot.pause()
        text = rendered(panel)
        assert "mirror failing (3x" in text and "AccessDenied" in text


def test_the_palette_offers_the_restore():
    from yolotui.tui.app_actions import RunActionsMixin

    class Host(RunActionsMixin):
        screen = None

        def current_run(self, screen=None):
            return None

    titles = [command.title for command in Host().run_action_commands(None)]
    assert "Restore a run from its mirror" in titles


def test_restore_args_default_the_project():
    from yolotui.tui.screens.restore_mirror import restore_args

    assert restore_args("m/exp", "") == ["restore", "m/exp", "--project", "runs/train", "--json"]
