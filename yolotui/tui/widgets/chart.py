"""A line chart drawn in braille dots (2x4 dots a cell): no plotting dependency, crisp over SSH.

Why our own: textual-plotext would add plotext as a dependency and re-render a whole figure per update;
this chart is one small render function, follows the Textual theme through component classes, and draws
only what the dashboard needs (a few series over epochs, a y range, a legend).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

# Dot bit for (dx, dy) inside a braille cell, dx in 0..1, dy in 0..3 (top to bottom).
_DOT_BITS = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))
SERIES_CLASSES = tuple(f"chart--series-{i}" for i in range(6))


@dataclass(frozen=True)
class Series:
    """One line of a chart: its legend label and values (None for a gap). Only the values from index
    `scale_from` on set the chart's y range; earlier ones beyond it are drawn at its edge."""

    label: str
    values: tuple[float | None, ...]
    scale_from: int = 0


def plot_cells(series: Sequence[Series], width: int, height: int,
               low: float, high: float) -> list[list[tuple[int, int]]]:
    """Rasterise `series` into a height x width grid of (dot bits, series index of the last line drawn)."""
    grid = [[(0, -1) for _ in range(width)] for _ in range(height)]
    dots_w, dots_h = width * 2, height * 4
    span = (high - low) or 1.0

    def put(x: int, y: int, index: int) -> None:
        if 0 <= x < dots_w and 0 <= y < dots_h:
            row, col = y // 4, x // 2
            bits, _ = grid[row][col]
            grid[row][col] = (bits | _DOT_BITS[y % 4][x % 2], index)

    for index, line in enumerate(series):
        values = line.values
        count = len(values)
        if count == 0:
            continue
        previous: tuple[int, int] | None = None
        for i, value in enumerate(values):
            if value is None or not math.isfinite(value):
                previous = None
                continue
            x = 0 if count == 1 else round(i * (dots_w - 1) / (count - 1))
            y = round((high - value) / span * (dots_h - 1))
            y = min(dots_h - 1, max(0, y))
            if previous is None:
                put(x, y, index)
            else:
                _line(previous, (x, y), lambda px, py, k=index: put(px, py, k))
            previous = (x, y)
    return grid


def _line(start: tuple[int, int], end: tuple[int, int], put) -> None:
    """Bresenham between two dot positions."""
    (x0, y0), (x1, y1) = start, end
    dx, dy = abs(x1 - x0), -abs(y1 - y0)
    sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
    err = dx + dy
    while True:
        put(x0, y0)
        if x0 == x1 and y0 == y1:
            return
        twice = 2 * err
        if twice >= dy:
            err += dy
            x0 += sx
        if twice <= dx:
            err += dx
            y0 += sy


def value_range(series: Sequence[Series]) -> tuple[float, float] | None:
    """The min and max over the finite values that set the range (each series' from its `scale_from` on), or
    None when there is none."""
    finite = [v for s in series for v in s.values[s.scale_from:] if v is not None and math.isfinite(v)]
    if not finite:
        return None
    low, high = min(finite), max(finite)
    if high - low < 1e-9:
        pad = abs(high) * 0.05 or 0.5
        low, high = low - pad, high + pad
    return low, high


class BrailleChart(Widget):
    """Several series over the same x (epochs), y axis labels at the left, a legend on the first line."""

    DEFAULT_CSS = """
    BrailleChart {
        height: 1fr;
        min-height: 5;
        padding: 0 1;
        text-wrap: nowrap;
        text-overflow: clip;
    }
    BrailleChart > .chart--series-0 { color: $primary; }
    BrailleChart > .chart--series-1 { color: $warning; }
    BrailleChart > .chart--series-2 { color: $success; }
    BrailleChart > .chart--series-3 { color: $error; }
    BrailleChart > .chart--series-4 { color: $accent; }
    BrailleChart > .chart--series-5 { color: $secondary; }
    BrailleChart > .chart--axis { color: $foreground-muted; }
    """
    COMPONENT_CLASSES = {*SERIES_CLASSES, "chart--axis"}

    def __init__(self, empty_text: str = "no epochs yet", *, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.series: tuple[Series, ...] = ()
        self.empty_text = empty_text

    def set_series(self, series: Sequence[Series]) -> None:
        """Replace the plotted data (repaints only when it changed)."""
        series = tuple(series)
        if series != self.series:
            self.series = series
            self.refresh()

    def render(self) -> Text:
        width, height = self.content_size.width, self.content_size.height
        styles = [self.get_component_rich_style(name) for name in SERIES_CLASSES]
        axis = self.get_component_rich_style("chart--axis")
        legend = Text(no_wrap=True, overflow="ellipsis")
        for index, line in enumerate(self.series):
            last = next((v for v in reversed(line.values) if v is not None), None)
            if index:
                legend.append("  ")
            legend.append("━ ", styles[index % len(styles)])
            legend.append(f"{line.label} {_short(last)}" if last is not None else line.label)
        legend.truncate(max(1, width), overflow="ellipsis")
        bounds = value_range(self.series)
        if bounds is None or height < 2 or width < 10:
            return Text.assemble(legend, "\n", Text(self.empty_text, axis))
        low, high = bounds
        labels = (_short(high), _short(low))
        axis_w = max(len(label) for label in labels) + 1
        plot_w, plot_h = width - axis_w, height - 1
        grid = plot_cells(self.series, plot_w, plot_h, low, high)
        out = Text(no_wrap=True)
        out.append_text(legend)
        for row_index, row in enumerate(grid):
            out.append("\n")
            label = labels[0] if row_index == 0 else labels[1] if row_index == plot_h - 1 else ""
            out.append(label.rjust(axis_w - 1) + "┤" if label else " " * (axis_w - 1) + "│", axis)
            for bits, index in row:
                style: Style | None = styles[index % len(styles)] if index >= 0 else None
                out.append(chr(0x2800 + bits), style)
        return out


def _short(value: float | None) -> str:
    """A value in at most 5 characters or so: 0.123, 12.3, 1.2e+03."""
    if value is None:
        return "--"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:.1e}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    return f"{value:.3f}"
