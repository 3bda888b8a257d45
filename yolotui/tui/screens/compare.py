"""Runs side by side: one chart per metric with a line per run, the best/final table, and the option diff.

Opened from the runs table with `v` on the marked runs (space marks). The data comes from
yolotui.jobs.compare (read in a thread); the charts reuse BrailleChart, one colour per run, the legend
naming each run. Escape goes back to the table.
"""

from __future__ import annotations

from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from yolotui.tui.widgets.chart import BrailleChart, Series

# The curves shown, in order (names as yolotui.jobs.compare.CURVES gives them).
CHART_METRICS = ("mAP50-95", "mAP50", "P", "R", "train box", "train cls", "train dfl", "val box", "val cls",
                 "val dfl")
_MISSING = "--"


class ComparisonLoaded(Message):
    """The comparison read in the worker thread (or the reason it could not be)."""

    def __init__(self, comparison, error: str | None = None) -> None:
        super().__init__()
        self.comparison = comparison
        self.error = error


def series_for(comparison, metric: str) -> list[Series]:
    """One Series per run for `metric`, aligned on the epoch (None where a run has no value)."""
    curves = [dict(run.curves.get(metric, [])) for run in comparison.runs]
    last_epoch = max((max(c) for c in curves if c), default=-1)
    return [Series(run.name, tuple(curve.get(epoch) for epoch in range(last_epoch + 1)))
            for run, curve in zip(comparison.runs, curves)]


def _num(value) -> str:
    return _MISSING if value is None else f"{value:.3f}"


class CompareScreen(Screen):
    """The comparison of a few runs (arrows / PgUp / PgDn scroll)."""

    AUTO_FOCUS = "#compare-body"

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("r", "reload", "Reload"),
    ]
    DEFAULT_CSS = """
    CompareScreen #compare-body { height: 1fr; }
    CompareScreen .compare-title { height: 1; padding: 0 1; text-style: bold; }
    CompareScreen BrailleChart { height: 8; min-height: 8; }
    CompareScreen DataTable { height: auto; max-height: 16; margin: 0 1 1 1; }
    CompareScreen #compare-message { height: auto; padding: 0 1; color: $foreground-muted; }
    """

    def __init__(self, run_dirs: list[Path]) -> None:
        super().__init__()
        self.run_dirs = [Path(p) for p in run_dirs]
        self.comparison = None
        self.loaded = False

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="compare-body"):
            yield Static("loading…", id="compare-message")
            yield Static("best epoch (by fitness) and last epoch", classes="compare-title")
            yield DataTable(id="compare-metrics", cursor_type="none", zebra_stripes=True)
            for metric in CHART_METRICS:
                yield Static(metric, classes="compare-title")
                yield BrailleChart(empty_text="no epochs yet", id=_chart_id(metric))
            yield Static("opt.yaml / hyp.yaml keys that differ", classes="compare-title")
            yield DataTable(id="compare-diff", cursor_type="none", zebra_stripes=True)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.title = f"yolotui: {len(self.run_dirs)} runs side by side"
        self.load()

    def action_reload(self) -> None:
        """Read the runs again."""
        self.load()

    @work(thread=True, exit_on_error=False, group="compare-load")
    def load(self) -> None:
        """Read the runs (thread); posts ComparisonLoaded."""
        from yolotui.errors import UserError
        from yolotui.jobs.compare import compare_runs

        try:
            self.post_message(ComparisonLoaded(compare_runs(self.run_dirs)))
        except UserError as exc:
            self.post_message(ComparisonLoaded(None, str(exc)))
        except Exception as exc:  # a library bug shows as a line, not a traceback
            self.post_message(ComparisonLoaded(None, f"could not compare the runs: {exc}"))

    def on_comparison_loaded(self, message: ComparisonLoaded) -> None:
        message_box = self.query_one("#compare-message", Static)
        if message.error:
            message_box.update(message.error)
            return
        comparison = self.comparison = message.comparison
        names = ", ".join(run.name for run in comparison.runs)
        notes = [f"{len(comparison.runs)} runs: {names}", *comparison.warnings]
        message_box.update("\n".join(notes))
        self._fill_metrics(comparison)
        for metric in CHART_METRICS:
            self.query_one(f"#{_chart_id(metric)}", BrailleChart).set_series(series_for(comparison, metric))
        self._fill_diff(comparison)
        self.loaded = True

    def _fill_metrics(self, comparison) -> None:
        table = self.query_one("#compare-metrics", DataTable)
        table.clear(columns=True)
        # narrow headers so that 80 columns hold the table: best epoch, its mAPs, then the last epoch's
        table.add_columns("run", "state", "epochs", "best@", "mAP50", "50-95", "last50", "50-95")
        for run in comparison.runs:
            best, final = run.best or {}, run.final or {}
            planned = run.epochs_planned if run.epochs_planned is not None else "?"
            table.add_row(run.name, run.state, f"{run.epochs_done}/{planned}",
                          str(best["epoch"]) if best else _MISSING, _num(best.get("mAP50")),
                          _num(best.get("mAP50-95")), _num(final.get("mAP50")), _num(final.get("mAP50-95")))

    def _fill_diff(self, comparison) -> None:
        table = self.query_one("#compare-diff", DataTable)
        table.clear(columns=True)
        table.add_columns("key", *(run.name for run in comparison.runs))
        if not comparison.diff:
            table.add_row("no differences", *("" for _ in comparison.runs))
        for diff in comparison.diff:
            cells = [_MISSING if v is None else str(v)[:30] for v in diff.values]
            table.add_row(f"{diff.file.split('.')[0]}:{diff.key}", *cells)


def _chart_id(metric: str) -> str:
    return "chart-" + metric.replace(" ", "-").replace("-95", "_95")
