"""The home screen as a cockpit: the GPU strip, the richer rows (progress, ETA, failure, wait, backend, trend)
and the bounded readers behind them."""

from __future__ import annotations

import json

import pytest
from fake_nvml import FakeNVML, scenario
from tui_fakes import FakeSampler, rendered, wait_until
from tui_fixtures import FIXED_NOW, make_run, standard_runs

from yolotui.runs.layout import EVENTS_JSONL, RESULTS_CSV
from yolotui.runs.summary import RunSummary
from yolotui.telemetry.gpu import GpuSampler
from yolotui.tui.app import YolotuiApp
from yolotui.tui.home_data import ExtrasReader, backend_label, progress, tail_results
from yolotui.tui.widgets.gpu_strip import GpuStrip, max_strip_lines

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


class CountingSampler:
    """Wraps a sampler and counts the samples taken (one sampler, shared by every widget)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.calls = 0

    def sample(self, own_pids=None):
        self.calls += 1
        return self.inner.sample(own_pids) if own_pids else self.inner.sample()


def eight_gpus() -> GpuSampler:
    gpus = [scenario("thermal" if i == 3 else "power_cap" if i == 5 else "healthy", i,
                     procs=[(4242, 40000)] if i < 2 else []) for i in range(8)]
    return GpuSampler(nvml=FakeNVML(gpus))


def make_app(sampler) -> YolotuiApp:
    return YolotuiApp(sampler=sampler, clock=lambda: FIXED_NOW, gpu_interval=None, remember_theme=False)


def strip_text(app) -> list[str]:
    return rendered(app.home.query_one(GpuStrip)).splitlines()


@pytest.mark.parametrize("size,layout", [((200, 60), "one"), ((120, 30), "two"), ((80, 24), "two"),
                                         ((70, 14), "summary")])
async def test_the_strip_shows_every_gpu_and_folds_to_the_room(runs, size, layout):
    app = make_app(eight_gpus())
    async with app.run_test(size=size) as pilot:
        assert await wait_until(pilot, lambda: app.home.settled, 30)
        await pilot.pause()
        lines = strip_text(app)
        text = "\n".join(lines)
        if layout == "one":
            assert len(lines) == 8 and lines[0].startswith("GPU0 H200")
            assert "mem" in lines[0] and "util 97%" in lines[0] and "520/700W" in lines[0]
            assert "shapes-running 39G 28%" in lines[0]  # the running run's trainer (pid 4242) holds 39 of 140 GiB
            assert "throttled: thermal" in lines[3] and "throttled: power cap" in lines[5]
        elif layout == "two":
            assert len(lines) == 4 and all("│" in line for line in lines)
            assert "⚠thermal" in lines[1] and "⚠power cap" in lines[2]
            assert "shapes-running" in lines[0]
            assert all(len(line) <= size[0] for line in lines)
        else:
            assert len(lines) == 1 and lines[0].startswith("8 GPUs")
            assert "64–91°C" in text and "util 97%" in text and "throttled: GPU3" in text


async def test_a_cpu_only_machine_shows_cpu_and_ram(runs):
    app = make_app(FakeSampler(gpu=False))
    async with app.run_test(size=(120, 30)) as pilot:
        assert await wait_until(pilot, lambda: app.home.settled, 30)
        await pilot.pause()
        (line,) = strip_text(app)
        assert line.startswith("cpu 12%") and "ram" in line and "7.8/31G" in line and "no NVIDIA GPU" in line


async def test_home_and_dashboard_share_the_one_sampler_and_home_stops_behind_the_dashboard(runs):
    sampler = CountingSampler(FakeSampler())
    app = YolotuiApp(sampler=sampler, clock=lambda: FIXED_NOW, gpu_interval=0.05, remember_theme=False)
    async with app.run_test(size=(120, 30)) as pilot:
        assert await wait_until(pilot, lambda: sampler.calls >= 3, 30)
        assert app.sampler is sampler
        app.open_run(runs["running"].path)
        assert await wait_until(pilot, lambda: app.screen is not app.home and app.screen.settled, 30)
        await pilot.pause(0.3)
        home_timer = app.home._gpu_timer
        assert home_timer is None  # home no longer samples: the dashboard's panel does, through the same sampler
        before = sampler.calls
        assert await wait_until(pilot, lambda: sampler.calls > before + 2, 30)


def test_strip_lines_budget_leaves_the_table_most_of_the_screen():
    assert max_strip_lines(14) == 1
    assert max_strip_lines(24) == 4
    assert max_strip_lines(30) == 6
    assert max_strip_lines(60) == 8


def summary_of(**fields) -> RunSummary:
    base = {"name": "r", "path": "/nowhere", "state": "running"}
    return RunSummary(**{**base, **fields})


def test_progress_and_eta_from_epoch_intervals_or_the_batch_rate():
    summary = summary_of(epoch=4, epochs=10, batch=10, batches=20)
    epochs = [{"type": "epoch", "epoch": i, "ts": 1000.0 + 60 * i} for i in range(4)]
    fraction, eta = progress(summary, epochs)
    assert fraction == pytest.approx(0.45)
    assert eta == pytest.approx(0.55 * 10 * 60)
    batches = [{"type": "batch", "epoch": 4, "batch": b, "ts": 2000.0 + b} for b in (2, 10)]  # 1 s a batch
    fraction, eta = progress(summary, batches)
    assert eta == pytest.approx(0.55 * 10 * 20)
    assert progress(summary, [])[1] is None  # no pace known: no ETA rather than a wrong one
    assert progress(summary_of(state="stopped", epoch=4, epochs=10), epochs) == (0.4, None)
    assert progress(summary_of(epochs=None), epochs) == (None, None)


def test_results_tail_reads_the_last_rows_only(tmp_path):
    path = tmp_path / RESULTS_CSV
    header = "epoch,train/box_loss,metrics/mAP_0.5:0.95\n"
    path.write_text(header + "".join(f"{i},{1.0 / (i + 1):.4f},{i / 1000:.4f}\n" for i in range(2000)) + "1999,0.5")
    rows = tail_results(path, max_bytes=4096)
    assert 100 < len(rows) < 400  # the tail, not 2000 rows
    assert rows[-1]["epoch"] == 1999 and rows[-1]["metrics/mAP_0.5:0.95"] == pytest.approx(1.999)
    ultra = tmp_path / "u.csv"
    ultra.write_text("epoch,time,metrics/mAP50-95(B)\n1,3.0,0.1\n2,6.0,0.2\n")
    assert [(r["epoch"], r["metrics/mAP_0.5:0.95"]) for r in tail_results(ultra)] == [(0, 0.1), (1, 0.2)]
    assert tail_results(tmp_path / "missing.csv") == []


def test_backend_label_comes_from_the_backend_object():
    assert backend_label("yolotui") == "engine"
    assert backend_label("exec") == "command"
    assert backend_label("official") == "official"
    assert backend_label("ultralytics") == "ultralytics"
    assert backend_label("nonsense") == "nonsense"
    assert backend_label(None) is None


def test_extras_read_a_bounded_tail_of_a_huge_events_file(tmp_path):
    run = make_run(tmp_path, "big", state="running", epochs=300, done_epochs=2, hold_lock=True)
    try:
        events = run.path / EVENTS_JSONL
        line = json.dumps({"ts": 1.0, "type": "batch", "epoch": 2, "epochs": 300, "batch": 1, "batches": 9}) + "\n"
        with open(events, "a") as handle:
            handle.write(line * 60_000)  # ~5 MB of batch events
        from yolotui.runs.summary import summarize

        reads: list[int] = []
        import builtins

        real_open = builtins.open

        class Spy:
            def __init__(self, handle):
                self.handle = handle

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.handle.close()

            def __getattr__(self, name):
                return getattr(self.handle, name)

            def read(self, size=-1):
                data = self.handle.read(size)
                reads.append(len(data))
                return data

        def spying_open(file, *args, **kwargs):
            handle = real_open(file, *args, **kwargs)
            return Spy(handle) if str(file) == str(events) else handle

        summary = summarize(run.path)
        builtins.open = spying_open
        try:
            extras = ExtrasReader().extras(summary)
        finally:
            builtins.open = real_open
        assert reads and max(reads) <= 64 * 1024
        assert extras.backend == "command" and extras.trainer_pid == 4242
        assert len(extras.map_trend) == 2
    finally:
        run.release()


def preview_text(app) -> str:
    from yolotui.tui.widgets.run_preview import RunPreview

    return rendered(app.home.query_one(RunPreview))


async def highlight(pilot, app, name: str) -> None:
    table = app.home.query_one("#runs")
    table.move_cursor(row=table.get_row_index(next(r.summary.path for r in app.home.rows if r.summary.name == name)))
    assert await wait_until(pilot, lambda: app.home.settled and name in preview_text(app), 30)


async def test_the_preview_gives_state_curves_checkpoint_log_and_doctors_next_action(runs):
    app = make_app(FakeSampler())
    async with app.run_test(size=(200, 60)) as pilot:
        assert await wait_until(pilot, lambda: app.home.settled, 30)
        assert app.home.preview_shown  # a large screen shows it from the start, beside the table
        assert not app.home.query_one("#home-main").has_class("-stacked")
        await highlight(pilot, app, "ssh-interrupted")
        text = preview_text(app)
        assert "interrupted after 6/50 epochs done" in text
        assert "mAP  ▁▂▃▅▆█ 0.275 best@6" in text
        assert "last.pt resumable  2m ago" in text
        assert "advice resume from last.pt (6/50 epochs done)" in text
        assert " R  resume at epoch 7 of 50" in text  # doctor's advice and the key that does it
        assert "ssh-interrupted log line 29" in text  # the end of train.log
        await highlight(pilot, app, "coco-finished")
        assert " R  extend with more epochs · F fine-tune" in preview_text(app)
        await highlight(pilot, app, "bad-data-failed")
        text = preview_text(app)
        assert "failed (data) after 1/30 epochs done: data.yaml: key 'train' missing" in text
        assert " n  start a new run" in text
        await highlight(pilot, app, "shapes-running")
        text = preview_text(app)
        assert "running: epoch 4 of 20, 18% done" in text and "advice" not in text  # a live run needs none


async def test_p_toggles_the_preview_and_a_narrow_screen_stacks_it_below_the_table(runs):
    app = make_app(FakeSampler())
    async with app.run_test(size=(80, 24)) as pilot:
        assert await wait_until(pilot, lambda: app.home.settled, 30)
        pane = app.home.query_one("#preview")
        assert not app.home.preview_shown and not pane.display  # too small to show it unasked
        await pilot.press("p")
        assert await wait_until(pilot, lambda: pane.display and app.home.settled and "shapes-running" in
                                preview_text(app), 30)
        assert app.home.query_one("#home-main").has_class("-stacked")
        await pilot.press("p")
        assert await wait_until(pilot, lambda: not pane.display)


async def test_a_new_run_without_a_checkpoint_says_when_its_first_comes(tmp_path):
    run = make_run(tmp_path, "fresh", state="running", epochs=5, done_epochs=0, hold_lock=True, checkpoint=None)
    try:
        app = make_app(FakeSampler())
        async with app.run_test(size=(120, 40)) as pilot:
            assert await wait_until(pilot, lambda: app.home.settled and "fresh" in preview_text(app), 30)
            assert "last.pt none yet (first at the end of epoch 1)" in preview_text(app)
    finally:
        run.release()


def test_the_log_tail_reads_only_the_end_of_train_log(tmp_path):
    from yolotui.tui.preview_data import LOG_TAIL_BYTES, log_tail

    path = tmp_path / "train.log"
    path.write_text("".join(f"line {i}\n" for i in range(400_000)))  # ~4.5 MB
    assert log_tail(path, count=3) == ["line 399997", "line 399998", "line 399999"]
    assert LOG_TAIL_BYTES <= 64 * 1024
    assert log_tail(tmp_path / "none.log") == []


def test_the_first_frame_waits_for_no_telemetry_dashboard_or_doctor_code(cli_env):
    """Home's widgets import only the light panel base: NVML, the dashboard's panels and doctor load after the
    first paint (in workers) or when a dashboard opens."""
    import subprocess
    import sys

    code = ("import sys, yolotui.tui.app\n"
            "print(sorted(m for m in sys.modules if m.startswith(('yolotui.telemetry.gpu', 'yolotui.tui.widgets.panels',"
            " 'yolotui.jobs', 'yolotui.health', 'yolotui.backends', 'pynvml', 'psutil'))))\n")
    done = subprocess.run([sys.executable, "-c", code], env=cli_env, capture_output=True, text=True, timeout=60,
                          cwd=cli_env["PYTHONPATH"].split(":")[0])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


async def test_in_a_120x30_terminal_home_shows_every_gpu_and_every_runs_progress_eta_or_failure(tmp_path):
    from cockpit_fixtures import PLAN, cockpit_runs, eight_gpu_sampler

    runs = cockpit_runs(tmp_path / "runs", 12)
    try:
        app = make_app(eight_gpu_sampler())
        async with app.run_test(size=(120, 30)) as pilot:
            assert await wait_until(pilot, lambda: app.home.settled, 30)
            await pilot.pause()
            strip = "\n".join(strip_text(app))
            assert all(f"GPU{i} " in strip for i in range(8))
            table = app.home.query_one("#runs")
            assert table.region.height - 1 >= len(PLAN) + 1  # every row (and the header) in view, no scrolling
            progress = {str(table.get_row_at(i)[0]): str(table.get_row_at(i)[3]) for i in range(table.row_count)}
            assert progress["coco-yolov9c"].endswith("eta 10:08:40")
            assert progress["coco-oom"].startswith("oom · ")
            assert progress["next-up"].startswith("GPU 0: held by")
    finally:
        for run in runs:
            run.release()


async def test_a_lost_gpu_and_nonsense_readings_show_as_such_never_a_traceback(runs):
    sampler = GpuSampler(nvml=FakeNVML([scenario("healthy", 0), scenario("lost", 1), scenario("garbage", 2)]))
    app = make_app(sampler)
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_until(pilot, lambda: app.home.settled, 30)
        await pilot.pause()
        lines = strip_text(app)
        assert len(lines) == 3 and lines[0].startswith("GPU0 H200")
        assert lines[1].startswith("GPU1") and "°C" not in lines[1]  # its error in words instead of readings
        assert lines[2].startswith("GPU2") and "--°C" in lines[2] and "-500" not in lines[2]


def test_state_in_words_for_a_queued_run_says_what_it_waits_for_once():
    from yolotui.tui.home_data import HomeRow
    from yolotui.tui.preview_data import state_words

    queued = HomeRow(summary_of(state="queued", message="queued: waiting for GPU 0: held by exp7"), None)
    assert state_words(queued) == "queued: waiting for GPU 0: held by exp7"
    running = HomeRow(summary_of(epoch=4, epochs=10), None, fraction=0.45, eta_s=3300.0)
    assert state_words(running).startswith("running: epoch 5 of 10, 45% done, about ")
