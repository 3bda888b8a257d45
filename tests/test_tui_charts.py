"""Dashboard charts that read like charts (epoch ticks, the current value, the best epoch, `g` to switch what the
left chart shows) and the first-run states that teach (no checkpoint yet, what a queued run waits for)."""

from __future__ import annotations

import pytest
from tui_fakes import FakeSampler, rendered, wait_until
from tui_fixtures import FIXED_NOW, make_run, standard_runs

from yolotui.runs.atomic import atomic_write_json
from yolotui.runs.status import read_status, status_path
from yolotui.tui.app import YolotuiApp
from yolotui.tui.screens.dashboard import DashboardScreen
from yolotui.tui.widgets.chart import BrailleChart, Series, best_index, tick_step, x_axis
from yolotui.tui.widgets.panels import CheckpointPanel, ProgressPanel

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def test_ticks_are_round_epochs_that_fit():
    assert tick_step(20, 10) == 2
    assert tick_step(300, 10) == 50
    assert tick_step(5, 10) == 1
    axis = x_axis(tuple(range(1, 21)), 60)
    assert len(axis) == 60 and axis.startswith("1")
    labels = [int(part) for part in axis.replace("─", " ").split()]
    assert labels[0] == 1 and all(label % 2 == 0 for label in labels[1:]) and labels[-1] == 20


def test_the_best_epoch_is_marked_beside_its_label_never_over_it():
    epochs = (1, 2, 3)
    axis = x_axis(epochs, 30, best=2)
    assert "▲" in axis and axis.replace("─", " ").split()[-1] in ("3▲", "▲3", "▲")
    assert "3" in axis  # the label stays
    assert best_index(Series("m", (0.1, 0.5, None, 0.4))) == 1
    assert best_index(Series("m", (None,))) is None


async def dashboard_app(run_dir, size=(120, 40)):
    app = YolotuiApp(run_dir=run_dir, sampler=FakeSampler(), clock=lambda: FIXED_NOW, gpu_interval=None,
                     remember_theme=False)
    return app


async def test_charts_have_epoch_ticks_the_current_value_the_best_epoch_and_g_switches(tmp_path):
    runs = standard_runs(tmp_path / "runs")
    try:
        app = await dashboard_app(runs["finished"].path)
        async with app.run_test(size=(120, 40)) as pilot:
            assert await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.settled,
                                    30)
            await pilot.pause()
            left = app.screen.query_one("#loss-chart", BrailleChart)
            right = app.screen.query_one("#metric-chart", BrailleChart)
            metrics = str(right.render())
            assert "mAP50-95 0.455 ★" in metrics  # the legend says the current epoch is the best
            assert "◂0.455" in metrics  # the current value at the right edge
            axis = metrics.splitlines()[-1]
            assert axis.lstrip().startswith("└1") and "10" in axis and "▲" in axis
            assert "◂" in str(left.render()) and left.border_title.startswith("train loss")
            await pilot.press("g")
            await pilot.pause()
            assert left.border_title.startswith("val metrics") and right.border_title == "train loss"
            await pilot.press("g")
            await pilot.pause()
            assert left.border_title.startswith("learning rate") and "lr 0.010" in str(left.render())
            await pilot.press("g")
            await pilot.pause()
            assert left.border_title.startswith("images/s") and "img/s 123" in str(left.render())
            await pilot.press("g")
            await pilot.pause()
            assert left.border_title.startswith("train loss")
    finally:
        for run in runs.values():
            run.release()


async def test_a_new_run_says_its_first_checkpoint_comes_at_the_end_of_epoch_one(tmp_path):
    run = make_run(tmp_path, "fresh", state="running", epochs=5, done_epochs=0, hold_lock=True, checkpoint=None,
                   batch_in_progress=3)
    try:
        app = await dashboard_app(run.path)
        async with app.run_test(size=(120, 40)) as pilot:
            assert await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.settled,
                                    30)
            text = rendered(app.screen.query_one(CheckpointPanel))
            assert "last.pt no checkpoint yet (first at the end of epoch 1)" in text
            assert "missing" not in text
    finally:
        run.release()


async def test_a_queued_run_says_what_it_waits_for(tmp_path):
    run = make_run(tmp_path, "waiting", state="queued", epochs=5, done_epochs=0, checkpoint=None, hold_lock=True)
    try:
        status = read_status(run.path)
        status.message = "queued: waiting for GPU 0: held by exp7"  # as the launcher words it
        atomic_write_json(status_path(run.path), status.to_dict())
        app = await dashboard_app(run.path)
        async with app.run_test(size=(120, 40)) as pilot:
            assert await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.settled,
                                    30)
            text = rendered(app.screen.query_one(ProgressPanel))
            assert text.startswith("queued: waiting for GPU 0: held by exp7")
    finally:
        run.release()
