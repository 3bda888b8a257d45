"""Home, the cockpit: every GPU in a strip at the top, every indexed run in one table, live; `/` filters,
`s` (or a header click) sorts, Enter opens.

A live run shows its progress and ETA, a failed one its failure class, a queued one what it waits for.
Space marks runs (a dot before the name) and `v` opens the marked runs side by side (CompareScreen). The GPU
strip samples through the app's one sampler while home is in front (the dashboard's panel uses the same one).
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from yolotui import formatting
from yolotui.runs import index
from yolotui.tui.app_actions import RUN_ACTION_BINDINGS
from yolotui.tui.fleet_home import FleetHomeMixin
from yolotui.tui.home_data import HomeRow
from yolotui.tui.home_source import LocalRuns
from yolotui.tui.screens.home_panes import BESIDE_MIN_WIDTH, HomePanes, preview_fits
from yolotui.tui.watch import watch_changes
from yolotui.tui.widgets.gpu_strip import GpuStrip
from yolotui.tui.widgets.run_cells import COLUMNS, cells, sort_key
from yolotui.tui.widgets.run_preview import RunPreview

SLOW_POLL_S = 5.0  # catches what no file event announces: a supervisor dying (its lock released), ages
MIN_GAP_S = 0.5  # at most two table rebuilds a second however fast files change


__all__ = ["COLUMNS", "HomeRow", "HomeScreen", "RunsLoaded"]


class RunsLoaded(Message):
    """A fresh reading of every indexed run (posted from the loader thread)."""

    def __init__(self, rows: list[HomeRow], error: str | None = None, partial: bool = False) -> None:
        super().__init__()
        self.rows = rows
        self.error = error
        self.partial = partial  # shown at once; the checkpoint verdicts of this reading are still being made


class HomeScreen(FleetHomeMixin, HomePanes, Screen):
    """The runs table (with every configured host's runs: yolotui.tui.fleet_home), the GPU strip, the preview."""

    AUTO_FOCUS = "#runs"
    BINDINGS = [
        Binding("enter", "open_run", "Open", show=True, priority=False),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("s", "sort", "Sort", show=False),  # a header click sorts too; in ? help (the footer fits 80)
        Binding("r", "reload", "Reload", show=False),  # the table is live; in ? help
        Binding("p", "toggle_preview", "Preview"),
        Binding("d", "remove_run", "Remove", show=False),
        Binding("space", "toggle_mark", "Mark", show=False),
        Binding("v", "compare", "Compare", show=False),  # in ? help; the footer must fit 80 columns
        *RUN_ACTION_BINDINGS,  # wizards and run actions (yolotui.tui.app_actions)
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]
    DEFAULT_CSS = """
    HomeScreen #filter { display: none; height: 3; }
    HomeScreen #filter.-visible { display: block; }
    HomeScreen #home-main { height: 1fr; }
    HomeScreen #runs { height: 1fr; width: 1fr; }
    HomeScreen #preview { width: 2fr; max-width: 72; }
    HomeScreen #home-main.-stacked { layout: vertical; }
    HomeScreen #home-main.-stacked #preview { width: 1fr; max-width: 100%; height: 45%; min-height: 6;
                                              border-left: none;
                                              border-top: hkey $foreground 20%; }
    HomeScreen #home-message { height: auto; padding: 0 1; color: $foreground-muted; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[HomeRow] = []
        self.filter_text = ""
        self.sort_column = COLUMNS.index("started")  # newest first
        self.sort_reverse = False
        self.loaded = False
        self.load_count = 0
        self._in_flight = False
        self._dirty = False
        self._watched: tuple[str, ...] = ()
        self._shown: tuple = ()
        self._suspended = False
        self._note = ""
        self._slow_timer = None
        self.marked: set[str] = set()  # run folders marked with space, for `v` (compare)
        self.source = LocalRuns()  # where the rows come from (yolotui/tui/home_source.py)

    def compose(self) -> ComposeResult:
        yield GpuStrip(id="gpu-strip")
        with Vertical(id="home-body"):
            size = self.app.size  # the first frame already has the pane where it belongs: no restyle after it
            with Horizontal(id="home-main", classes="-stacked" if size.width < BESIDE_MIN_WIDTH else ""):
                yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
                pane = RunPreview(id="preview")
                pane.display = preview_fits(size)
                yield pane
            yield Static("loading runs…", id="home-message")
        yield Footer(compact=True)  # 80 columns fit every footer key

    def on_mount(self) -> None:
        self.title = "yolotui: runs"
        table = self.query_one("#runs", DataTable)
        for key in COLUMNS:
            table.add_column(key, key=key)
        self.call_after_refresh(self.request_load)  # first paint first, then read the runs, then the GPUs
        self.fleet_start()  # other machines' runs, when hosts are configured

    def on_resize(self) -> None:
        self.place_preview()

    @on(DataTable.RowHighlighted, "#runs")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.request_preview()

    def on_screen_suspend(self) -> None:
        """A dashboard covers the table: stop watching and polling until it is back (saves CPU)."""
        self._suspended = True
        if self._slow_timer is not None:
            self._slow_timer.stop()
            self._slow_timer = None
        self.workers.cancel_group(self, "home-watch")
        self._watched = ()
        self.stop_gpus()  # the dashboard samples through the same sampler meanwhile

    def on_screen_resume(self) -> None:
        """Back on top: read now and watch again."""
        if self._suspended:
            self._suspended = False
            self.request_load()
            self.sample_gpus()

    @property
    def settled(self) -> bool:
        """True once the runs were read twice (the watcher's catch-up included), a GPU sample is shown and the
        preview (when shown) holds the highlighted run."""
        return self.load_count >= 2 and self.gpu_snapshot is not None and self.preview_settled

    # -- loading ------------------------------------------------------------------------------------------
    def request_load(self) -> None:
        """Start a reading now, or right after the one in flight."""
        if self._suspended:
            return
        if self._in_flight:
            self._dirty = True
            return
        self._in_flight = True
        self._dirty = False
        self.load_runs()

    @work(thread=True, exit_on_error=False, group="home-load")
    def load_runs(self) -> None:
        """Read every run through the screen's source (thread); posts RunsLoaded, a first partial one while
        checkpoint verdicts (or, the first time, the runs' extras) are still being read (home_source.py)."""
        try:
            rows, problem = self.source.read(
                lambda partial, note: self.post_message(RunsLoaded(partial, note, partial=True)),
                first=self.load_count == 0)
        except Exception as exc:  # a library bug shows as a line, not a traceback
            self.post_message(RunsLoaded([], f"could not read the runs: {exc}"))
            return
        self.post_message(RunsLoaded(rows, problem))

    def on_runs_loaded(self, message: RunsLoaded) -> None:
        if message.partial:  # the runs now; the same reading follows with its checkpoint verdicts
            self.rows = message.rows
            self._render_table()
            return
        self._in_flight = False
        self.rows = message.rows
        self.loaded = True
        self.load_count += 1
        if self.load_count == 1 and not self._suspended:
            self.sample_gpus()  # NVML starts in this worker, once the table is filled: the runs come first
        self._render_table()
        self.show_gpus()
        self.request_preview()
        if message.error:
            note = message.error
        elif not self.rows:
            note = "No runs yet. Start one with `yolotui train ...`, `yolotui demo` or `yolotui exec -- CMD`."
        else:
            running = sum(1 for r in self.rows if r.summary.state in ("running", "restarting"))
            note = (f"{formatting.plural(len(self.rows), 'run')}, {running} running · Enter opens · "
                    "quitting never stops a run")
        if note != self._note:
            self._note = note
            self.query_one("#home-message", Static).update(note)
        for row in self.rows:
            self.app.note_run_state(row.summary.path, row.summary.name, row.summary.state, row.summary.attempt)
        paths = tuple(sorted({str(index.home_dir())} | {r.summary.path for r in self.rows}))
        restarted = paths != self._watched
        if restarted:
            # A new watcher misses what changes while it starts: read once more just after.
            self._watched = paths
            self.watch_runs(paths)
        if self._suspended:
            return
        if self._slow_timer is not None:
            self._slow_timer.stop()
        delay = MIN_GAP_S if (self._dirty or restarted) else SLOW_POLL_S
        self._slow_timer = self.set_timer(delay, self.request_load)

    @work(exclusive=True, group="home-watch", exit_on_error=False)
    async def watch_runs(self, paths: tuple[str, ...]) -> None:
        """Reload when the index or any run folder changes (the slow poll covers a failed watcher).

        The state folder is made first when it does not exist yet (a first run launched from another terminal
        creates it and its index): a folder that is not there cannot be watched, and its first run would
        wait for the slow poll."""
        try:
            index.home_dir().mkdir(parents=True, exist_ok=True)
        except OSError:
            pass
        await watch_changes([Path(p) for p in paths], self._on_files_changed)

    def _on_files_changed(self) -> None:
        self._dirty = True
        if not self._in_flight and self._slow_timer is not None:
            self._slow_timer.stop()
            self._slow_timer = self.set_timer(0.05, self.request_load)

    # -- table --------------------------------------------------------------------------------------------
    def visible_rows(self) -> list[HomeRow]:
        """The rows that pass the filter, in the chosen order."""
        needle = self.filter_text.lower().strip()
        every = [*self.rows, *(HomeRow(s, None) for s in self.fleet_summaries())]
        rows = [r for r in every if not needle or needle in " ".join(
            str(x) for x in (r.summary.name, r.summary.state, r.summary.device or "", r.summary.path)).lower()]
        rows.sort(key=lambda r: sort_key(r, COLUMNS[self.sort_column]), reverse=self.sort_reverse)
        return rows

    def _render_table(self) -> None:
        table = self.query_one("#runs", DataTable)
        now = self.app.clock()
        content = [(row.summary.path, cells(row, now, row.summary.path in self.marked))
                   for row in self.visible_rows()]
        labels = [key + ((" ▼" if self.sort_reverse else " ▲") if i == self.sort_column else "")
                  for i, key in enumerate(COLUMNS)]
        if (content, labels) == self._shown:
            return  # nothing changed: no repaint
        self._shown = (content, labels)
        selected = self.selected_path()
        table.clear()
        # Widths are set here, before the rows go in: DataTable's own auto width is measured on idle, and a
        # frame painted in between stays cached with the header's narrow widths.
        for position, (key, label) in enumerate(zip(COLUMNS, labels)):
            column = table.columns[key]
            column.label = Text(label)
            column.auto_width = False
            column.width = max([len(label)] + [Text(str(row[position])).cell_len if not isinstance(
                row[position], Text) else row[position].cell_len for _, row in content])
        for path, row in content:
            table.add_row(*row, key=path)
        if selected is not None and selected in table.rows:
            table.move_cursor(row=table.get_row_index(selected))

    def fleet_rows_changed(self) -> None:
        """A host's runs were read again."""
        self._render_table()

    def selected_path(self) -> str | None:
        """The folder of the highlighted run, if any."""
        table = self.query_one("#runs", DataTable)
        if not table.row_count:
            return None
        try:
            return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        except Exception:
            return None

    # -- actions ------------------------------------------------------------------------------------------
    def action_open_run(self) -> None:
        """Open the highlighted run's dashboard."""
        path = self.selected_path()
        if path and not self.open_remote(path):
            self.app.open_run(Path(path))

    @on(DataTable.RowSelected, "#runs")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value and not self.open_remote(event.row_key.value):
            self.app.open_run(Path(event.row_key.value))

    @on(DataTable.HeaderSelected, "#runs")
    def _header_selected(self, event: DataTable.HeaderSelected) -> None:
        self.set_sort(event.column_index)

    def set_sort(self, column: int) -> None:
        """Sort by `column`; choosing the same column again flips the order."""
        if column == self.sort_column:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_column, self.sort_reverse = column, False
        self._render_table()

    def action_sort(self) -> None:
        """Sort by the next column."""
        self.sort_column = (self.sort_column + 1) % len(COLUMNS)
        self.sort_reverse = False
        self._render_table()
        self.notify(f"sorted by {COLUMNS[self.sort_column]}", timeout=1.5)

    def action_filter(self) -> None:
        """Show the filter box and focus it (mounted on first use: a faster first frame)."""
        boxes = self.query("#filter")
        if boxes:
            box = boxes.first(Input)
        else:
            box = Input(placeholder="filter runs by name, state or device (Esc clears)", id="filter")
            self.query_one("#home-body").mount(box, before=0)
        box.add_class("-visible")
        box.focus()

    def action_clear_filter(self) -> None:
        """Empty and hide the filter box."""
        for box in self.query("#filter").results(Input):
            box.value = ""
            box.remove_class("-visible")
        self.query_one("#runs", DataTable).focus()

    def action_reload(self) -> None:
        """Read every run again now."""
        self.request_load()

    def action_remove_run(self) -> None:
        """Remove the highlighted run (finished, failed, stopped or interrupted) after a confirmation screen;
        a live run is refused with what to do instead."""
        from yolotui.tui.screens.confirm_remove import ConfirmRemoveScreen, refusal

        path = self.selected_path()
        if not path or self.remote_run_action("remove"):  # a remote row: the CLI says how
            return
        why = refusal(Path(path))
        if why is not None:
            self.notify(why, title="not removed", severity="warning", timeout=8)
            return

        def done(outcome: str | None) -> None:
            if outcome:
                self.notify(f"{Path(path).name} {outcome}" + (" (folder deleted)" if outcome == "deleted" else
                                                               " from the list (folder kept)"), timeout=4)
                self.request_load()

        self.app.push_screen(ConfirmRemoveScreen(Path(path)), done)

    def action_toggle_mark(self) -> None:
        """Mark or unmark the highlighted run for comparison, then move down a row."""
        path = self.selected_path()
        if not path:
            return
        self.marked.symmetric_difference_update({path})
        self._render_table()
        table = self.query_one("#runs", DataTable)
        table.move_cursor(row=min(table.cursor_row + 1, table.row_count - 1))

    def action_compare(self) -> None:
        """Open the marked runs (at least two) side by side."""
        known = {row.summary.path for row in self.rows}
        marked = [row.summary.path for row in self.visible_rows() if row.summary.path in self.marked & known]
        if len(marked) < 2:
            self.notify("mark at least two runs with space, then press v", severity="warning", timeout=3)
            return
        from yolotui.tui.screens.compare import CompareScreen  # on first use: a faster start

        self.app.push_screen(CompareScreen([Path(p) for p in marked]))

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value
        self._render_table()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        if not event.value:
            event.input.remove_class("-visible")
        self.query_one("#runs", DataTable).focus()
