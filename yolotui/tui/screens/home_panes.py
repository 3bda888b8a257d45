"""The home screen's panes beside its runs table: the GPU strip above it and the preview of the highlighted run.

Both read in thread workers after the first paint. The strip samples through the app's one sampler
(`app.sampler`, the one the dashboard's GPU panel uses too) while home is in front, and stops behind a
dashboard. The preview follows the highlighted row (after a short pause, so scrolling through the table does
not read every run on the way), beside the table on a wide screen, below it on a narrow one; `p` shows or
hides it.
"""

from __future__ import annotations

from typing import Any

from textual import work
from textual.message import Message

from yolotui.runs.layout import LIVE_STATES
from yolotui.tui.home_data import HomeRow, device_users, pid_owners
from yolotui.tui.sources import safe_sample
from yolotui.tui.widgets.gpu_strip import GpuStrip
from yolotui.tui.widgets.run_preview import RunPreview

PREVIEW_PAUSE_S = 0.15  # the highlight must rest this long before the preview reads the run
BESIDE_MIN_WIDTH = 160  # from this width the preview sits beside the table, else below it
SHOWN_MIN_HEIGHT = 24  # beside the table, the preview is shown from the start from this height
STACKED_MIN_HEIGHT = 36  # below the table, from this height


def preview_fits(size) -> bool:
    """Whether a screen of `size` shows the preview unasked: beside the table from BESIDE_MIN_WIDTH columns,
    below it from STACKED_MIN_HEIGHT lines (a 120x30 terminal keeps its rows for the table)."""
    width, height = size[0], size[1]
    return height >= SHOWN_MIN_HEIGHT and (width >= BESIDE_MIN_WIDTH or height >= STACKED_MIN_HEIGHT)


class GpuRead(Message):
    """One sample of the GPUs (or the host) from the app's sampler (posted from the sampler thread)."""

    def __init__(self, snapshot: Any) -> None:
        super().__init__()
        self.snapshot = snapshot


class PreviewRead(Message):
    """The preview of one run (posted from the preview thread)."""

    def __init__(self, preview: Any) -> None:
        super().__init__()
        self.preview = preview


class HomePanes:
    """Mixed into HomeScreen: the GPU strip's sampling and the preview pane."""

    gpu_snapshot: Any = None
    preview: Any = None  # the highlighted run's Preview (yolotui.tui.preview_data), once read
    preview_wanted: bool | None = None  # the user's choice with `p`; None: by the screen's size
    _gpu_timer: Any = None
    _gpu_in_flight = False
    _preview_timer: Any = None
    _previewed: tuple | None = None
    _preview_reader: Any = None

    # -- GPUs -----------------------------------------------------------------------------------------------
    def sample_gpus(self) -> None:
        """Take a sample now, unless one is on its way (one chain of samples, however often home comes back)."""
        if self._gpu_in_flight:
            return
        self._gpu_in_flight = True
        self._sample_gpus()

    @work(thread=True, exit_on_error=False, group="home-gpu")
    def _sample_gpus(self) -> None:
        """One sample from the app's one GPU sampler (thread); posts GpuRead."""
        self.post_message(GpuRead(safe_sample(self.app.sampler)))

    def on_gpu_read(self, message: GpuRead) -> None:
        self._gpu_in_flight = False
        self.gpu_snapshot = message.snapshot
        self.show_gpus()
        interval = self.app.gpu_interval
        if interval and not self._suspended:
            self._gpu_timer = self.set_timer(interval, self.sample_gpus)

    def stop_gpus(self) -> None:
        """No more samples until home is back in front (a dashboard samples through the same sampler)."""
        if self._gpu_timer is not None:
            self._gpu_timer.stop()
            self._gpu_timer = None

    def show_gpus(self) -> None:
        """Paint the latest sample with the live runs that hold each GPU."""
        if self.gpu_snapshot is None:
            return
        live = [r for r in self.rows if r.summary.state in LIVE_STATES and r.summary.state != "queued"]
        self.query_one(GpuStrip).show(self.gpu_snapshot, pid_owners(live), device_users(live))

    # -- preview --------------------------------------------------------------------------------------------
    @property
    def preview_shown(self) -> bool:
        """Whether the preview pane is on screen now."""
        return self.preview_wanted if self.preview_wanted is not None else preview_fits(self.size)

    def place_preview(self) -> None:
        """Show or hide the pane, beside the table on a wide screen, below it on a narrow one (styles are
        touched only when they change: each change restyles the screen)."""
        main = self.query_one("#home-main")
        stacked = self.size.width < BESIDE_MIN_WIDTH
        if main.has_class("-stacked") != stacked:
            main.set_class(stacked, "-stacked")
        pane = self.query_one(RunPreview)
        if pane.display != self.preview_shown:
            pane.display = self.preview_shown
        if pane.display:
            self.request_preview()

    def action_toggle_preview(self) -> None:
        """Show or hide the preview of the highlighted run."""
        self.preview_wanted = not self.preview_shown
        self.place_preview()

    def highlighted_row(self) -> HomeRow | None:
        """The row under the cursor."""
        path = self.selected_path()
        return next((row for row in self.rows if row.summary.path == path), None)

    def request_preview(self) -> None:
        """Read the highlighted run's preview once the highlight rests (nothing when it did not change)."""
        if not self.preview_shown:
            return
        row = self.highlighted_row()
        self.query_one(RunPreview).show(row, self.preview, self.app.clock())
        if row is None:
            return
        seen = (row.summary.path, row.summary.to_dict(), row.checkpoint.verdict if row.checkpoint else None)
        if seen == self._previewed:
            return
        self._previewed = seen
        if self._preview_timer is not None:
            self._preview_timer.stop()
        self._preview_timer = self.set_timer(PREVIEW_PAUSE_S, lambda: self.read_preview(row))

    @work(thread=True, exclusive=True, exit_on_error=False, group="home-preview")
    def read_preview(self, row: HomeRow) -> None:
        """Read `row`'s preview (thread); posts PreviewRead."""
        from yolotui.tui.preview_data import Preview, PreviewReader

        if self._preview_reader is None:
            self._preview_reader = PreviewReader()
        try:
            preview = self._preview_reader.read(row)
        except Exception as exc:  # a library bug shows as a line in the pane
            preview = Preview(row.summary.path, problem=f"could not read the run: {exc}")
        self.post_message(PreviewRead(preview))

    def on_preview_read(self, message: PreviewRead) -> None:
        self._preview_timer = None
        self.preview = message.preview
        self.query_one(RunPreview).show(self.highlighted_row(), self.preview, self.app.clock())

    @property
    def preview_settled(self) -> bool:
        """True when the pane is hidden, or shows the highlighted run's read preview."""
        if not self.preview_shown:
            return True
        row = self.highlighted_row()
        return row is None or (self._preview_timer is None and self.preview is not None
                               and self.preview.path == row.summary.path
                               and self._previewed is not None and self._previewed[0] == row.summary.path)
