"""The home screen's preview pane: the highlighted run at a glance, without opening its dashboard.

State in words, epoch and ETA, mini loss and mAP50-95 curves (the best epoch named), the last checkpoint and
its verdict, doctor's advice with the key that acts on it for a run that ended, and the last lines of train.log.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from yolotui.formatting import age as format_age
from yolotui.tui.home_data import HomeRow
from yolotui.tui.widgets.panel_base import _PANEL_CSS_CLASSES, STATE_CLASS, VERDICT_CLASS, Panel
from yolotui.tui.widgets.sparkline import sparkline


class RunPreview(Panel):
    """A text pane; `show(row, preview, now)` paints it (the preview may lag the row by one reading)."""

    DEFAULT_CSS = ("RunPreview { height: 1fr; padding: 0 1; border-left: vkey $foreground 20%; }"
                   + _PANEL_CSS_CLASSES.format(name="RunPreview"))

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self.row: HomeRow | None = None
        self.preview: Any = None  # a yolotui.tui.preview_data.Preview
        self.now = 0.0

    def show(self, row: HomeRow | None, preview: Any, now: float) -> None:
        """Paint `row` with `preview` (None: still being read; a preview of another run is ignored)."""
        self.row, self.now = row, now
        self.preview = preview if preview is not None and row is not None and preview.path == row.summary.path \
            else None
        self._paint()

    def on_resize(self) -> None:
        super().on_resize()
        self._paint()

    def _paint(self) -> None:
        width = max(20, self.content_size.width or 40)
        height = max(3, self.content_size.height or 12)
        self.set_text(self.render_text(width, height))

    def render_text(self, width: int, height: int) -> Text:
        """The pane's text for `width` x `height` cells."""
        from yolotui.tui.preview_data import state_words

        text = Text(no_wrap=True, overflow="ellipsis")
        row = self.row
        if row is None:
            text.append("no run highlighted", self.style_for("muted"))
            return text
        summary = row.summary
        text.append(summary.name, "bold")
        text.append(f"  {row.backend or ''}", self.style_for("label"))
        text.append("\n")
        text.append(state_words(row), self.style_for(STATE_CLASS.get(summary.state, "muted")))
        preview = self.preview
        spark_w = max(8, width - 22)
        if preview is not None and preview.losses:
            text.append("\nloss ", self.style_for("label"))
            text.append(_curve(preview.losses, spark_w), self.style_for("warn"))
            text.append(f" {preview.losses[-1]:.3f}")
        if preview is not None and preview.maps:
            text.append("\nmAP  ", self.style_for("label"))
            text.append(_curve(preview.maps, spark_w), self.style_for("good"))
            text.append(f" {preview.maps[-1]:.3f}")
            if preview.best_epoch is not None:
                text.append(f" best@{preview.best_epoch}", self.style_for("label"))
        self._checkpoint(text)
        if preview is None:
            text.append("\nreading…", self.style_for("muted"))
            return text
        if preview.advice or preview.problem:
            import textwrap

            lines = textwrap.wrap(preview.advice or preview.problem or "", max(10, width - 7))[:3]
            style = self.style_for("muted" if preview.problem else "info")
            for index, line in enumerate(lines):
                text.append("\nadvice " if index == 0 else "\n       ", self.style_for("label"))
                text.append(line, style)
        if preview.action:
            text.append("\n")
            key, _, words = preview.action.partition(" ")
            text.append(f" {key} ", "reverse bold")
            text.append(f" {words}", self.style_for("info"))
        used = text.plain.count("\n") + 1
        room = height - used - 1
        if room > 0 and preview.log_lines:
            text.append("\n── train.log", self.style_for("label"))
            for line in preview.log_lines[-room:]:
                text.append(f"\n{line}", self.style_for("muted"))
        return text

    def _checkpoint(self, text: Text) -> None:
        row = self.row
        facts = row.checkpoint if row is not None else None
        text.append("\nlast.pt ", self.style_for("label"))
        if facts is None:
            # A run's first checkpoint is written at the end of its first epoch: say so, it is not a fault.
            early = row is not None and not row.summary.epoch and row.summary.state not in ("failed", "finished")
            text.append("none yet (first at the end of epoch 1)" if early else "none", self.style_for("muted"))
            return
        text.append(facts.verdict, self.style_for(VERDICT_CLASS.get(facts.verdict, "muted")))
        if facts.mtime:
            text.append(f"  {format_age(self.now - facts.mtime)} ago", self.style_for("label"))


def _curve(values: tuple[float, ...], width: int) -> str:
    """`values` as a sparkline at most `width` cells long, scaled to their own range, starting at the left."""
    from yolotui.telemetry.history import downsample

    points = [v for v in downsample(list(values), width) if v is not None]
    if not points:
        return ""
    low, high = min(points), max(points)
    return sparkline(points, len(points), low, high if high > low else low + 1e-9)
