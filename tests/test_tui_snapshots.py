"""Snapshot tests (pytest-textual-snapshot) of the home screen and the dashboard at 80x24 and 120x40.

Deterministic: a fixed clock, fixture files with fixed times, UTC, and a fake GPU sampler read once.
Update with `pytest tests/test_tui_snapshots.py --snapshot-update` after an intended change.
"""

from __future__ import annotations

import time

import pytest
from tui_fakes import FakeSampler
from tui_fixtures import FIXED_NOW, standard_runs

from yolotui.tui.app import YolotuiApp
from yolotui.tui.screens.dashboard import DashboardScreen


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    made = standard_runs(tmp_path / "runs")
    yield made
    for run in made.values():
        run.release()
    monkeypatch.undo()
    time.tzset()


def make_app(run_dir=None) -> YolotuiApp:
    return YolotuiApp(run_dir=run_dir, theme="yolo-night", sampler=FakeSampler(), clock=lambda: FIXED_NOW,
                      gpu_interval=None, remember_theme=False)


async def wait_loaded(pilot) -> None:
    """Wait until the screen is drawn: the dashboard settled (run and GPU sample painted), or the home table
    read twice; then until every widget has processed its pending messages (layout included).

    A condition, not a time: under load the loop simply takes longer; it fails loudly after a minute.
    """
    app = pilot.app

    def loaded() -> bool:
        screen = app.screen
        if isinstance(screen, DashboardScreen):
            return screen.settled
        return app.home is not None and app.home.settled  # read twice (the watcher's catch-up) and GPUs shown

    deadline = time.monotonic() + 60
    while not loaded():
        assert time.monotonic() < deadline, "the screen never finished loading"
        await pilot.pause(0.05)
    await pilot.pause()  # the widgets' own refresh and layout messages
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()
    assert loaded(), "a new reading arrived while settling"


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_home_snapshot(runs, snap_compare, size):
    assert snap_compare(make_app(), terminal_size=size, run_before=wait_loaded)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_dashboard_snapshot(runs, snap_compare, size):
    assert snap_compare(make_app(runs["running"].path), terminal_size=size, run_before=wait_loaded)
