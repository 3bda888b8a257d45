"""The live dashboard of one run, rebuilt entirely from its directory (so reattaching is just opening it)."""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from pathlib import Path
from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer

from yolotui.telemetry.gpu_summary import latest as latest_summary
from yolotui.telemetry.history import samples_for
from yolotui.tui.app_actions import RUN_ACTION_BINDINGS
from yolotui.tui.runview import RunReader, RunView
from yolotui.tui.sources import run_pids, safe_sample
from yolotui.tui.watch import watch_changes
from yolotui.tui.widgets.chart import BrailleChart, Series
from yolotui.tui.widgets.panels import (
    CheckpointPanel,
    GpuPanel,
    LogTail,
    ProgressPanel,
    RestartPanel,
    RunHeader,
)

SLOW_POLL_S = 2.0  # lock state and ages change without a file event
MIN_GAP_S = 0.05
PAINT_GAP_S = 0.25  # news (an epoch, a state change) is painted within this
ROUTINE_GAP_S = 1.0  # batch progress, log lines and GPU samples share at most one frame a second
GPU_HISTORY_S = 600.0  # the GPU panel keeps ten minutes of samples
PIDS_TTL_S = 10.0  # one minute at one sample a second


class ViewLoaded(Message):
    """A fresh RunView (posted from the reader thread)."""

    def __init__(self, view: RunView | None, pids: set[int], error: str | None = None) -> None:
        super().__init__()
        self.view = view
        self.pids = pids
        self.error = error


class GpuSampled(Message):
    """One GPU/host sample (posted from the sampler thread)."""

    def __init__(self, snapshot: Any) -> None:
        super().__init__()
        self.snapshot = snapshot


CHART_MODES = ("loss", "metrics", "lr", "speed")
CHART_TITLES = {"loss": "train loss", "metrics": "val metrics", "lr": "learning rate", "speed": "images/s"}
CHART_EMPTY = {"loss": "no finished epoch yet", "metrics": "no validation yet", "lr": "no learning rate yet",
               "speed": "no speed yet"}


def chart_series(mode: str, points: list) -> list[Series]:
    """The series a chart shows in `mode` (CHART_MODES) over the finished epochs `points`."""
    if mode == "loss":
        return [Series("box", tuple(p.box for p in points)), Series("cls", tuple(p.cls for p in points)),
                Series("dfl", tuple(p.dfl for p in points), marked=True)]
    if mode == "lr":
        return [Series("lr", tuple(p.lr for p in points), marked=True)]
    if mode == "speed":
        return [Series("img/s", tuple(p.imgs_per_s for p in points), marked=True)]
    # The y axis follows mAP50 and mAP50-95 over the whole run but P and R over the later half only: a barely
    # trained model's few confident boxes make precision jump early (0.9, then 0.02), and a range set by
    # those jumps would flatten mAP's rise to the bottom rows. Earlier P/R points beyond it sit at its edge.
    recent = len(points) // 2
    return [Series("P", tuple(p.precision for p in points), scale_from=recent),
            Series("R", tuple(p.recall for p in points), scale_from=recent),
            Series("mAP50", tuple(p.map50 for p in points)),
            Series("mAP50-95", tuple(p.map for p in points), marked=True, best=True)]


class DashboardScreen(Screen):
    """Header, progress, loss and metric charts, GPU, checkpoints, restarts and the log tail of one run."""

    BINDINGS = [
        Binding("escape", "back", "Runs"),
        Binding("r", "reload", "Reload"),
        Binding("f", "toggle_log", "Log only"),
        Binding("L", "cycle_log_level", "Log level", show=False),
        Binding("g", "next_chart", "Chart", show=False),  # named in the chart's title and ? help
        *RUN_ACTION_BINDINGS,  # wizards and run actions (yolotui.tui.app_actions)
    ]

    def __init__(self, run_dir: Path, name: str | None = None) -> None:
        super().__init__()
        self.run_dir = Path(run_dir)
        self.reader = RunReader(self.run_dir, name)
        self.view: RunView | None = None
        self.pids: set[int] = set()
        self.gpu_history: deque[Any] = deque(maxlen=samples_for(GPU_HISTORY_S, None))
        self.refresh_count = 0
        self._in_flight = False
        self._dirty = False
        self._timer = None
        self._paint_timer = None
        self._pids_cache: tuple[int | None, float, set[int]] | None = None
        self._last_paint = 0.0
        self._paint_due = 0.0
        self._view_pending = False
        self._gpu_pending = False
        self.chart_mode = 0  # the left chart's CHART_MODES position (`g`)

    def compose(self) -> ComposeResult:
        yield RunHeader(id="run-header")
        yield ProgressPanel(id="progress")
        with Horizontal(id="charts"):
            loss = BrailleChart("no finished epoch yet", id="loss-chart")
            loss.border_title = "train loss"
            yield loss
            metrics = BrailleChart("no validation yet", id="metric-chart")
            metrics.border_title = "val metrics"
            yield metrics
        with Horizontal(id="panels"):
            with VerticalScroll(id="gpu-box"):
                yield GpuPanel(id="gpu")
            with VerticalScroll(id="ckpt-box"):
                yield CheckpointPanel(id="checkpoints")
                yield RestartPanel(id="restarts")
            yield LogTail(id="log")
        yield Footer(compact=True)  # 80 columns fit every footer key

    def on_mount(self) -> None:
        self.gpu_history = deque(self.gpu_history, maxlen=samples_for(GPU_HISTORY_S, self.app.gpu_interval))
        self.title = f"yolotui: {self.reader.view.name}"
        self.query_one("#gpu-box").border_title = "gpu"
        self.query_one("#ckpt-box").border_title = "checkpoints"
        self.query_one("#log").border_title = "train.log"
        self.request_refresh()
        self.watch_run()
        self.sample_gpu()

    # -- run files ----------------------------------------------------------------------------------------
    def request_refresh(self) -> None:
        """Read the run now, or right after the reading in flight."""
        if self._in_flight:
            self._dirty = True
            return
        self._in_flight, self._dirty = True, False
        self.read_run()

    @work(thread=True, exit_on_error=False, group="dash-read")
    def read_run(self) -> None:
        """Read what changed in the run folder (thread); posts ViewLoaded."""
        try:
            view = dataclasses.replace(self.reader.refresh())
            pids = self._run_pids(view.status.trainer_pid if view.status else None)
        except Exception as exc:  # shown as a line in the header, never a traceback
            self.post_message(ViewLoaded(None, set(), f"could not read {self.run_dir}: {exc}"))
            return
        self.post_message(ViewLoaded(view, pids))

    def _run_pids(self, trainer_pid: int | None) -> set[int]:
        """The trainer's process tree, rescanned only when the trainer changes or every PIDS_TTL_S (a scan
        walks /proc, far dearer than the rest of a reading)."""
        now = time.monotonic()
        cached = self._pids_cache
        if cached is not None and cached[0] == trainer_pid and now - cached[1] < PIDS_TTL_S:
            return cached[2]
        pids = run_pids(trainer_pid)
        self._pids_cache = (trainer_pid, now, pids)
        return pids

    def on_view_loaded(self, message: ViewLoaded) -> None:
        self._in_flight = False
        if message.view is not None:
            if message.pids != self.pids:
                self._gpu_pending = True
            previous = self.view
            self.view, self.pids = message.view, message.pids
            if self._view_pending and previous is not None:
                # Two readings share one frame: keep every new log line (log_lines holds the whole tail).
                if previous.log_reset or message.view.log_reset:
                    message.view.log_reset = True
                else:
                    message.view.new_log_lines = [*previous.new_log_lines, *message.view.new_log_lines]
            self._view_pending = True
            news = previous is None or (previous.state, previous.attempt, len(previous.points)) != (
                message.view.state, message.view.attempt, len(message.view.points))
            self._request_paint(PAINT_GAP_S if news else ROUTINE_GAP_S)
            self.app.note_run_state(str(self.run_dir), message.view.name, message.view.state,
                                    message.view.attempt)
        elif message.error:
            self.notify(message.error, severity="error", timeout=4)
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(MIN_GAP_S if self._dirty else SLOW_POLL_S, self.request_refresh)

    @work(exclusive=True, group="dash-watch", exit_on_error=False)
    async def watch_run(self) -> None:
        """Re-read as soon as a file in the run folder changes."""
        await watch_changes([self.run_dir], self._on_files_changed)

    def _on_files_changed(self) -> None:
        if self._in_flight:
            self._dirty = True
            return
        if self._timer is not None:
            self._timer.stop()
        self.request_refresh()

    @property
    def settled(self) -> bool:
        """True once the run and a GPU sample are painted and no repaint is waiting (tests, snapshots)."""
        return (self.refresh_count > 0 and bool(self.gpu_history) and self._paint_timer is None
                and not self._view_pending and not self._gpu_pending)

    def _request_paint(self, gap: float = ROUTINE_GAP_S) -> None:
        """Paint now, or once `gap` has passed since the last frame (one frame for everything that arrived).

        Each frame redraws most of the screen, so routine updates are pooled; news waits at most PAINT_GAP_S.
        """
        wait = self._last_paint + gap - time.monotonic()
        if self._paint_timer is not None:
            if wait >= self._paint_due - time.monotonic():
                return
            self._paint_timer.stop()  # news arrived while routine updates were waiting: paint sooner
        self._paint_due = time.monotonic() + max(0.0, wait)
        if wait > 0:
            self._paint_timer = self.set_timer(wait, self._paint)
        else:
            self._paint_timer = None
            self._paint()

    def _paint(self) -> None:
        self._paint_timer = None
        self._last_paint = time.monotonic()
        if self._view_pending and self.view is not None:
            self._view_pending = False
            self.refresh_count += 1
            self._gpu_pending = True  # the GPU panel shows the run's GPU summary and slowness verdict too
            self._render_view(self.view)
            self.view.new_log_lines = []
            self.view.log_reset = False
        if self._gpu_pending:
            self._gpu_pending = False
            status = self.view.status if self.view is not None else None
            self.query_one(GpuPanel).show(list(self.gpu_history), self.pids,
                                          latest_summary(getattr(status, "gpu_summary", None)),
                                          self.view.loop if self.view is not None else None)

    def _render_view(self, view: RunView) -> None:
        now = self.app.clock()
        self.query_one(RunHeader).show(view, now)
        self.query_one(ProgressPanel).show(view)
        self._render_charts(view)
        self.query_one(CheckpointPanel).show(view, now)
        self.query_one(RestartPanel).show(view)
        log = self.query_one("#log", LogTail)
        if view.log_reset:
            log.clear()
            log.write_lines(view.log_lines)
        elif view.new_log_lines:
            log.write_lines(view.new_log_lines)

    def _render_charts(self, view: RunView) -> None:
        """The left chart in the mode `g` chose, the right one the metrics (the losses while the left shows
        the metrics); x: epochs, 1-based."""
        left_mode = CHART_MODES[self.chart_mode]
        right_mode = "loss" if left_mode == "metrics" else "metrics"
        epochs = tuple(p.epoch + 1 for p in view.points)
        for chart_id, mode in (("#loss-chart", left_mode), ("#metric-chart", right_mode)):
            chart = self.query_one(chart_id, BrailleChart)
            chart.border_title = CHART_TITLES[mode] + (" · g: next" if chart_id == "#loss-chart" else "")
            chart.empty_text = CHART_EMPTY[mode]
            chart.set_series(chart_series(mode, view.points), epochs)

    def action_next_chart(self) -> None:
        """Switch the left chart: losses, metrics, learning rate, images per second."""
        self.chart_mode = (self.chart_mode + 1) % len(CHART_MODES)
        if self.view is not None:
            self._render_charts(self.view)

    # -- GPU ----------------------------------------------------------------------------------------------
    @work(thread=True, exit_on_error=False, group="dash-gpu")
    def sample_gpu(self) -> None:
        """Take one GPU/host sample (thread); posts GpuSampled."""
        self.post_message(GpuSampled(safe_sample(self.app.sampler, self.pids)))

    def on_gpu_sampled(self, message: GpuSampled) -> None:
        self.gpu_history.append(message.snapshot)
        self._gpu_pending = True
        self._request_paint()
        interval = self.app.gpu_interval
        if interval:
            self.set_timer(interval, self.sample_gpu)

    # -- actions ------------------------------------------------------------------------------------------
    def action_back(self) -> None:
        """Back to the runs table (the run goes on)."""
        self.app.show_home()

    def action_reload(self) -> None:
        """Re-read the run now."""
        self.request_refresh()

    def action_cycle_log_level(self) -> None:
        """Filter the log pane by level: all lines, then INFO, WARNING, ERROR and above."""
        log = self.query_one("#log", LogTail)
        level = log.cycle_level()
        log.border_title = "train.log" + (f" ≥ {level}" if level else "")

    def action_toggle_log(self) -> None:
        """Give the whole screen to the log tail, or restore the dashboard."""
        log = self.query_one("#log", LogTail)
        if self.maximized is log:
            self.minimize()
        else:
            self.maximize(log)

