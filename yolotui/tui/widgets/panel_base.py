"""What every text panel shares: the semantic colour classes (good, info, warn, bad, muted, label, share), the
state and verdict colours, and a Static that repaints only when its text changed.

Kept apart from the dashboard's panels (yolotui/tui/widgets/panels.py), which import telemetry and the run
reader: the home screen's widgets need only this, and the TUI's first frame does not wait for the rest.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

TEMP_WARN_C = 75.0
TEMP_HOT_C = 85.0

STATE_CLASS = {
    "running": "good",
    "finished": "info",
    "queued": "muted",
    "restarting": "warn",
    "stopping": "warn",
    "interrupted": "warn",
    "stopped": "muted",
    "failed": "bad",
}
VERDICT_CLASS = {
    "resumable": "good",
    "finished": "info",
    "incomplete": "warn",
    "foreign": "warn",
    "unknown": "muted",
    "corrupt": "bad",
    "missing": "bad",
    "checking": "muted",  # the runs table, while a new or changed checkpoint's verdict is being made
}

_PANEL_CSS_CLASSES = """
    {name} {{ text-wrap: nowrap; text-overflow: ellipsis; }}
    {name} > .panel--good {{ color: $success; text-style: bold; }}
    {name} > .panel--info {{ color: $primary; text-style: bold; }}
    {name} > .panel--warn {{ color: $warning; text-style: bold; }}
    {name} > .panel--bad {{ color: $error; text-style: bold; }}
    {name} > .panel--muted {{ color: $foreground-muted; }}
    {name} > .panel--label {{ color: $foreground-muted; }}
    {name} > .panel--share {{ color: $accent; }}
"""
_COMPONENTS = {"panel--good", "panel--info", "panel--warn", "panel--bad", "panel--muted", "panel--label",
               "panel--share"}


class Panel(Static):
    """A Static with the semantic colour classes every panel uses."""

    COMPONENT_CLASSES = _COMPONENTS
    _shown: Text | None = None

    def set_text(self, text: Text) -> None:
        """Show `text`; nothing is repainted when it did not change, and the layout is redone only when the
        number of lines changed (a full-screen relayout per update costs far more than the panel itself)."""
        previous = self._shown
        if previous is not None and previous.plain == text.plain and previous.spans == text.spans:
            return
        self._shown = text
        relayout = previous is None or previous.plain.count("\n") != text.plain.count("\n")
        self.update(text, layout=relayout)

    def on_resize(self) -> None:
        self._shown = None  # widths changed: let the next update lay out again

    def style_for(self, kind: str):
        """The Rich style of a semantic colour: good, info, warn, bad, muted, label, share."""
        return self.get_component_rich_style(f"panel--{kind}")
