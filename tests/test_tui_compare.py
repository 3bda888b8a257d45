"""The compare screen: space marks runs in the table, `v` overlays their curves, metrics table and option diff.

One run is a yolotui-style fixture run (status.json, events), the other an official-style folder (results.csv,
opt.yaml, hyp.yaml only): the screen works for both. Also: a queued run shows what it waits for.
"""

from __future__ import annotations

import time

import pytest
import yaml
from test_compare import official_like_run
from tui_fakes import FakeSampler
from tui_fixtures import FIXED_NOW, make_run

from yolotui.runs.atomic import atomic_write_json
from yolotui.runs.status import RunStatus, status_path
from yolotui.tui.app import YolotuiApp
from yolotui.tui.screens.compare import CompareScreen, series_for
from yolotui.tui.widgets.chart import BrailleChart


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def two_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    root = tmp_path / "runs"
    engine = make_run(root, "engine-run", state="finished", epochs=6, done_epochs=6, started=FIXED_NOW - 7200)
    (engine.path / "opt.yaml").write_text(yaml.safe_dump({"name": "engine-run", "epochs": 6, "batch_size": 16,
                                                          "imgsz": 640}))
    (engine.path / "hyp.yaml").write_text(yaml.safe_dump({"lr0": 0.01, "mosaic": 1.0}))
    official = official_like_run(root, "official-run", [(0.20, 0.10), (0.50, 0.30), (0.45, 0.28)],
                                 {"epochs": 3, "batch_size": 32, "imgsz": 640}, {"lr0": 0.001, "mosaic": 1.0})
    yield engine.path, official
    monkeypatch.undo()
    time.tzset()


def make_app() -> YolotuiApp:
    return YolotuiApp(theme="yolo-night", sampler=FakeSampler(), clock=lambda: FIXED_NOW, gpu_interval=None,
                      remember_theme=False)


async def wait_until(pilot, condition, what: str) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, f"never {what}"
        await pilot.pause(0.05)


async def open_compare(pilot) -> None:
    """Mark the two runs with space, press v, and wait until the comparison is drawn."""
    app = pilot.app
    await wait_until(pilot, lambda: app.home is not None and app.home.load_count >= 2, "loaded the runs")
    await pilot.press("space", "space", "v")
    await wait_until(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.loaded,
                     "drew the comparison")
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


@pytest.mark.anyio
async def test_marks_and_v_open_the_overlay(two_runs):
    engine_dir, official_dir = two_runs
    app = make_app()
    async with app.run_test(size=(100, 40)) as pilot:
        await wait_until(pilot, lambda: app.home is not None and app.home.load_count >= 2, "loaded the runs")
        await pilot.press("v")  # nothing marked: a hint, no screen
        await pilot.pause()
        assert not isinstance(app.screen, CompareScreen)
        await open_compare(pilot)
        screen = app.screen
        assert {p.name for p in screen.run_dirs} == {"engine-run", "official-run"}
        chart = screen.query_one("#chart-mAP50_95", BrailleChart)
        assert sorted(s.label for s in chart.series) == ["engine-run", "official-run"]
        lengths = {len(s.values) for s in chart.series}
        assert lengths == {6}  # aligned on epochs: the 3-epoch run padded with gaps
        official_series = next(s for s in chart.series if s.label == "official-run")
        assert official_series.values[:3] == pytest.approx((0.10, 0.30, 0.28)) and official_series.values[3] is None
        rendered = str(chart.render())
        assert "━ engine-run" in rendered and "━ official-run" in rendered
        metrics = screen.query_one("#compare-metrics")
        assert metrics.row_count == 2
        diff = screen.query_one("#compare-diff")
        keys = [diff.get_row_at(i)[0] for i in range(diff.row_count)]
        assert "opt:batch_size" in keys and "hyp:lr0" in keys and "hyp:mosaic" not in keys
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.home


def test_series_for_aligns_epochs():
    from types import SimpleNamespace

    runs = [SimpleNamespace(name="a", curves={"mAP50": [(0, 0.1), (1, 0.2)]}),
            SimpleNamespace(name="b", curves={"mAP50": [(1, 0.5)]})]
    a, b = series_for(SimpleNamespace(runs=runs), "mAP50")
    assert a.values == (0.1, 0.2) and b.values == (None, 0.5)


@pytest.mark.anyio
async def test_a_queued_run_shows_what_it_waits_for(tmp_path):
    from yolotui.runs import index

    run = tmp_path / "runs" / "waiting-run"
    run.mkdir(parents=True)
    status = RunStatus(name="waiting-run", run_dir=str(run), state="queued",
                       message="waiting for GPU 0: held by yolotui run exp7", queue={"reason": "x"})
    atomic_write_json(status_path(run), status.to_dict())
    from yolotui.runs import lock

    fd = lock.acquire(run)  # a live queued run: its supervisor holds the lock
    try:
        index.add(run, "waiting-run")
        app = make_app()
        async with app.run_test(size=(120, 30)) as pilot:
            await wait_until(pilot, lambda: app.home is not None and app.home.load_count >= 1, "loaded")
            table = app.home.query_one("#runs")
            cells = [str(c) for c in table.get_row_at(0)]
            assert cells[1] == "queued" and "GPU 0: held by exp7" in cells
            await pilot.press("enter")  # its dashboard says the same in the header
            from test_tui_dashboard import text_of

            from yolotui.tui.screens.dashboard import DashboardScreen

            await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.settled,
                             "opened the dashboard")
            assert "waiting for GPU 0: held by yolotui run exp7" in text_of(app.screen, "#run-header")
    finally:
        import os

        os.close(fd)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_compare_snapshot(two_runs, snap_compare, size):
    assert snap_compare(make_app(), terminal_size=size, run_before=open_compare)
