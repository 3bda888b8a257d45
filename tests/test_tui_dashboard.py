"""Pilot tests of the run dashboard against fixture run folders (finished, running, failed, interrupted,
corrupt last.pt), and of what it shows for bad files."""

from __future__ import annotations

import pytest
from tui_fakes import FakeSampler, rendered, wait_until
from tui_fixtures import FIXED_NOW, Appender, standard_runs

from yolotui.runs.layout import EVENTS_JSONL, RESULTS_CSV, TRAIN_LOG
from yolotui.runs.status import status_path
from yolotui.tui.app import YolotuiApp
from yolotui.tui.screens.dashboard import DashboardScreen
from yolotui.tui.widgets.chart import BrailleChart

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def runs(tmp_path):
    made = standard_runs(tmp_path / "runs")
    yield made
    for run in made.values():
        run.release()


def make_app(run_dir, sampler=None, **kwargs) -> YolotuiApp:
    return YolotuiApp(run_dir=run_dir, sampler=sampler or FakeSampler(), clock=lambda: FIXED_NOW,
                      gpu_interval=None, **kwargs)


async def open_dashboard(pilot, app) -> DashboardScreen:
    assert await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.settled)
    screen = app.screen
    await pilot.pause()
    return screen


def text_of(screen, selector) -> str:
    return rendered(screen.query_one(selector))


async def test_finished_run(runs):
    app = make_app(runs["finished"].path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_dashboard(pilot, app)
        header = text_of(screen, "#run-header")
        assert "coco-finished" in header and "finished" in header and "attempt 1/3" in header
        assert "elapsed 50:00" in header  # ended - started
        progress = text_of(screen, "#progress")
        assert " 10/10 " in progress and "100%" in progress
        loss = screen.query_one("#loss-chart", BrailleChart)
        assert [s.label for s in loss.series] == ["box", "cls", "dfl"]
        assert len(loss.series[0].values) == 10
        metric_text = rendered(screen.query_one("#metric-chart"))
        assert "mAP50-95 0.455" in metric_text
        assert any(chr(0x2801) <= ch <= chr(0x28FF) for ch in metric_text), "braille dots drawn"
        checkpoints = text_of(screen, "#checkpoints")
        assert "last.pt" in checkpoints and "best.pt" in checkpoints and "finished" in checkpoints
        assert "2m ago" in checkpoints and "5m ago" in checkpoints
        log = screen.query_one("#log")
        assert log.line_count >= 30 and "coco-finished log line 29" in log.lines[-1]


async def test_running_run_follows_appended_events_results_and_log(runs):
    run = runs["running"]
    app = make_app(run.path)
    appender = Appender(run.path, first_epoch=3, epochs=20, interval=0.25, attempt=2)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_dashboard(pilot, app)
        header = text_of(screen, "#run-header")
        assert "running" in header and "attempt 2/3" in header and "elapsed 10:00" in header
        assert "overall 3/20" in text_of(screen, "#progress")  # epochs done (yolotui.formatting's numbering)
        assert "10/20" in text_of(screen, "#progress")  # 10 of 20 batches done (the event's `batch`)
        restarts = text_of(screen, "#restarts")
        assert "#1 oom" in restarts and "batch 16 -> 8" in restarts
        gpu = text_of(screen, "#gpu")
        assert "GPU0" in gpu and "71°C" in gpu and "512/700 W" in gpu
        assert "run 39.1G" in gpu  # the trainer pid's share of GPU memory
        appender.start()
        try:
            assert await wait_until(pilot, lambda: len(screen.view.points) >= 6, timeout=8)
        finally:
            appender.stop()
        assert await wait_until(pilot, lambda: len(screen.view.points) == 3 + len(appender.written_epochs))
        finished = len(screen.view.points)
        assert await wait_until(pilot, lambda: f"overall {finished}/20" in text_of(screen, "#progress"))
        assert len(screen.query_one("#loss-chart", BrailleChart).series[0].values) == finished
        log = screen.query_one("#log")
        assert await wait_until(pilot, lambda: any(f"epoch {finished - 1} done" in line for line in log.lines))
        assert f"epoch {finished - 1} done" in text_of(screen, "#log")  # on screen, not only kept


async def test_failed_run(runs):
    app = make_app(runs["failed"].path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_dashboard(pilot, app)
        assert "failed" in text_of(screen, "#run-header")
        assert "error: data data.yaml: key 'train' missing" in text_of(screen, "#progress")
        checkpoints = text_of(screen, "#checkpoints")
        assert "last.pt missing" in checkpoints


async def test_interrupted_run(runs):
    app = make_app(runs["interrupted"].path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_dashboard(pilot, app)
        assert "interrupted" in text_of(screen, "#run-header")
        assert "resumable" in text_of(screen, "#checkpoints")


async def test_corrupt_last_checkpoint(runs):
    app = make_app(runs["corrupt"].path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_dashboard(pilot, app)
        checkpoints = text_of(screen, "#checkpoints")
        assert "last.pt corrupt" in checkpoints
        assert "best.pt" in checkpoints and "best.pt resumable" in checkpoints


async def test_no_gpu_shows_cpu_and_ram(runs):
    app = make_app(runs["finished"].path, sampler=FakeSampler(gpu=False))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_dashboard(pilot, app)
        gpu = text_of(screen, "#gpu")
        assert "no NVIDIA GPU" in gpu and "cpu" in gpu and "ram" in gpu and "7.8/31G" in gpu


async def test_hot_gpu_is_flagged(runs):
    app = make_app(runs["finished"].path, sampler=FakeSampler(temperature=91))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_dashboard(pilot, app)
        gpu_panel = screen.query_one("#gpu")
        content = gpu_panel.render()
        assert "91°C" in str(content)
        hot_style = gpu_panel.get_component_rich_style("panel--bad")
        spans = [span for span in getattr(content, "spans", []) if str(content)[span.start:span.end].strip() == "91°C"]
        assert spans, "the temperature is styled"
        triplet = hot_style.color.triplet
        foreground = spans[0].style.foreground
        assert (foreground.r, foreground.g, foreground.b) == (triplet.red, triplet.green, triplet.blue)


async def test_bad_files_show_a_message_not_a_traceback(runs):
    run = runs["finished"].path
    status_path(run).write_text("[1, 2")  # torn JSON
    with open(run / EVENTS_JSONL, "a") as events:
        events.write('{"type": "epoch", "epoch": "seven"}\nnot json at all\n')
    (run / RESULTS_CSV).write_text("garbage,header\n1,2,3\n")
    (run / TRAIN_LOG).write_bytes(b"\xff\xfe binary \x00 junk\n")
    app = make_app(run)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_dashboard(pilot, app)
        header = text_of(screen, "#run-header")
        assert "interrupted" in header and "status.json unreadable" in header
        assert len(screen.view.points) == 10  # the good epoch events still count
        assert screen.query_one("#log").line_count == 1
        assert app.is_running


async def test_quitting_leaves_the_run_alone(runs):
    run = runs["running"]
    app = make_app(run.path)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_dashboard(pilot, app)
        await pilot.press("q")
    from yolotui.runs import lock
    assert lock.is_held(run.path)
    assert status_path(run.path).exists()


async def test_help_screen_and_log_fullscreen(runs):
    app = make_app(runs["finished"].path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_dashboard(pilot, app)
        await pilot.press("f")
        assert screen.maximized is screen.query_one("#log")
        await pilot.press("f")
        assert screen.maximized is None
        await pilot.press("question_mark")
        assert await wait_until(pilot, lambda: type(app.screen).__name__ == "HelpScreen")
        assert "quitting this screen never stops" in str(app.screen.query_one("#help-text").render())
        await pilot.press("escape")
        assert await wait_until(pilot, lambda: app.screen is screen)


async def test_gpu_panel_always_shows_host_ram_and_swap_with_the_runs_share(runs):
    app = make_app(runs["finished"].path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_dashboard(pilot, app)
        gpu = text_of(screen, "#gpu")
        assert "GPU0" in gpu and "ram " in gpu and "7.8/31G run 3.0G" in gpu
        assert "swap" in gpu and "0.5/8G" in gpu
        assert screen.gpu_history.maxlen == 60  # no sampling interval in tests: the floor; 600 at 1 s


async def test_capital_l_cycles_the_log_panes_level(runs):
    from yolotui.runs.layout import TRAIN_LOG

    run = runs["finished"].path
    with open(run / TRAIN_LOG, "a") as log:
        log.write("DEBUG: checkpoint last.pt: epoch 2 batch 0\nWARNING: BatchNorm recalibration skipped\n"
                  "RuntimeError: boom\n")
    app = make_app(run)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_dashboard(pilot, app)
        log = screen.query_one("#log")
        assert await wait_until(pilot, lambda: "RuntimeError: boom" in rendered(log))
        assert "DEBUG: checkpoint" in rendered(log)
        await pilot.press("L")
        assert log.border_title == "train.log ≥ INFO" and "DEBUG: checkpoint" not in rendered(log)
        await pilot.press("L")
        shown = rendered(log)
        assert log.border_title == "train.log ≥ WARNING" and "WARNING: BatchNorm" in shown
        assert "RuntimeError: boom" in shown and "epoch" not in shown.replace("=====", "")
        await pilot.press("L", "L")
        assert log.border_title == "train.log" and "DEBUG: checkpoint" in rendered(log)


def test_ten_minutes_of_history_fit_the_sparkline():
    from yolotui.telemetry.history import downsample, samples_for

    assert samples_for(600, 1.0) == 600 and samples_for(600, 2.5) == 240 and samples_for(600, None) == 60
    assert downsample([1, 5, 2, None, None, None, 3, 4], 4) == [5, 2, None, 4]
    assert downsample([1, 2], 4) == [1, 2]


def _live_run(root, name, events, log_lines=()):
    """A running run (its lock held) with these events (and train.log lines); returns the fixture run."""
    from tui_fixtures import make_run

    from yolotui.runs.events import EventWriter

    run = make_run(root, name, state="running", epochs=10, done_epochs=0, hold_lock=True, checkpoint=None,
                   log_lines=0)
    writer = EventWriter(run.path / EVENTS_JSONL, attempt=1)
    for event in events:
        event = dict(event)
        writer.emit(event.pop("type"), **event)
    with open(run.path / TRAIN_LOG, "a") as log:
        log.writelines(line + "\n" for line in log_lines)
    return run


async def test_the_log_tail_wraps_long_lines_instead_of_cutting_them(tmp_path):
    metrics = ("epoch 3/10 P=0.6312 R=0.5521 mAP50=0.5810 mAP50-95=0.3921 fitness=0.4110 val_box=1.2345 "
               "val_cls=0.8765 val_dfl=1.1111 (12.3s)")
    run = _live_run(tmp_path / "runs", "long-lines", [], log_lines=["short line", metrics])
    try:
        app = make_app(run.path)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await open_dashboard(pilot, app)
            log = screen.query_one("#log")

            def on_screen() -> str:  # what the panel draws, after its own cropping
                from textual.geometry import Region

                return "\n".join(strip.text for strip in log.render_lines(Region(0, 0, *log.size)))

            assert await wait_until(pilot, lambda: "(12.3s)" in on_screen())
            shown = on_screen()
            assert "…" not in shown and "short line" in shown
            assert "".join(metrics.split()) in "".join(shown.replace("│", "").split())  # every value, in order
    finally:
        run.release()


async def test_val_chart_range_follows_map_not_precisions_early_jumps(tmp_path):
    p = [0.95, 0.9, 0.05, 0.08, 0.1, 0.12]
    maps = [0.001, 0.005, 0.02, 0.04, 0.06, 0.08]
    events = [{"type": "epoch", "epoch": i, "epochs": 10, "losses": {"box": 1.0, "cls": 1.0, "dfl": 1.0},
               "metrics": {"P": p[i], "R": p[i] / 2, "mAP50": maps[i], "mAP50-95": maps[i] / 2}}
              for i in range(6)]
    run = _live_run(tmp_path / "runs", "jumpy", events)
    try:
        app = make_app(run.path)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await open_dashboard(pilot, app)
            chart = screen.query_one("#metric-chart", BrailleChart)
            assert await wait_until(pilot, lambda: len(chart.series[0].values) == 6)
            lines = rendered(chart).splitlines()
            top = lines[1].split("┤")[0].strip()
            assert float(top) == pytest.approx(0.12), lines[1]  # not 0.950: mAP's rise has the rows
            assert "mAP50 0.080" in lines[0] and "P 0.120" in lines[0]
    finally:
        run.release()


async def test_reattach_during_validation_says_validating_with_the_training_rate(tmp_path):
    events = [{"type": "start", "epochs": 10, "world_size": 1, "devices": ["cpu"], "resumed_from": None}]
    rates = [30.0, 150.0, 152.0, 149.0, 151.0, 56.0]  # loader start-up first, a short last batch at the end
    events += [{"type": "batch", "epoch": 0, "epochs": 10, "batch": b, "batches": 6, "imgs_per_s": r,
                "losses": {"box": 1.0, "cls": 1.0, "dfl": 1.0}} for b, r in zip(range(1, 7), rates)]
    run = _live_run(tmp_path / "runs", "validating", events)
    try:
        app = make_app(run.path)
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await open_dashboard(pilot, app)
            first = text_of(screen, "#progress").splitlines()[0]
            assert "validating" in first and "6/6" in first, first
            assert "eta" not in first and "trained at 150 img/s" in first and "56 img/s" not in first, first
    finally:
        run.release()
