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
    marked: bool = False  # its current value is marked at the right edge (a chart with epochs on its x axis)
    best: bool = False  # its best (highest) epoch is marked on the x axis and named in the legend


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
        self.epochs: tuple[int, ...] = ()
        self.empty_text = empty_text

    def set_series(self, series: Sequence[Series], epochs: Sequence[int] = ()) -> None:
        """Replace the plotted data (repaints only when it changed). `epochs`, one 1-based epoch number per x
        position, adds an x axis with epoch ticks, the marked series' current value at the right edge and the
        best epoch of a `best` series."""
        series, epochs = tuple(series), tuple(epochs)
        if (series, epochs) != (self.series, self.epochs):
            self.series, self.epochs = series, epochs
            self.refresh()

    def render(self) -> Text:
        width, height = self.content_size.width, self.content_size.height
        styles = [self.get_component_rich_style(name) for name in SERIES_CLASSES]
        axis = self.get_component_rich_style("chart--axis")
        with_x = bool(self.epochs) and height >= 4
        legend = self._legend(styles, axis, "  ", with_x)
        if legend.cell_len > width:
            legend = self._legend(styles, axis, " ", with_x)  # tighter before anything is cut
        legend.truncate(max(1, width), overflow="ellipsis")
        bounds = value_range(self.series)
        if bounds is None or height < 2 or width < 10:
            return Text.assemble(legend, "\n", Text(self.empty_text, axis))
        low, high = bounds
        labels = (_short(high), _short(low))
        axis_w = max(len(label) for label in labels) + 1
        marked = next((line for line in self.series if line.marked), None) if with_x else None
        mark_w = 7 if marked is not None and width >= 30 else 0
        plot_w, plot_h = width - axis_w - mark_w, height - (2 if with_x else 1)
        grid = plot_cells(self.series, plot_w, plot_h, low, high)
        mark_row = _value_row(marked, plot_h, low, high) if mark_w else None
        out = Text(no_wrap=True)
        out.append_text(legend)
        for row_index, row in enumerate(grid):
            out.append("\n")
            label = labels[0] if row_index == 0 else labels[1] if row_index == plot_h - 1 else ""
            out.append(label.rjust(axis_w - 1) + "┤" if label else " " * (axis_w - 1) + "│", axis)
            for bits, index in row:
                style: Style | None = styles[index % len(styles)] if index >= 0 else None
                out.append(chr(0x2800 + bits), style)
            if mark_row is not None and row_index == mark_row[0] and marked is not None:
                out.append(f"◂{mark_row[1]}"[:mark_w], styles[self.series.index(marked) % len(styles)])
        if with_x:
            best = next((best_index(line) for line in self.series if line.best), None)
            out.append("\n")
            out.append(" " * (axis_w - 1) + "└", axis)
            out.append(x_axis(self.epochs, plot_w, best), axis)
        return out


    def _legend(self, styles: list[Style], axis: Style, gap: str, with_x: bool) -> Text:
        """Each series' colour, label and current value; a `best` series' best value and epoch after a star (the
        star alone when the current epoch is the best)."""
        legend = Text(no_wrap=True, overflow="ellipsis")
        for index, line in enumerate(self.series):
            last = next((v for v in reversed(line.values) if v is not None), None)
            if index:
                legend.append(gap)
            legend.append("━ ", styles[index % len(styles)])
            legend.append(f"{line.label} {_short(last)}" if last is not None else line.label)
            best = best_index(line) if line.best and with_x else None
            if best is not None:
                latest = max(i for i, v in enumerate(line.values) if v is not None)
                legend.append(" ★" if best == latest else f" ★{_short(line.values[best])}@{self.epochs[best]}", axis)
        return legend


def best_index(series: Series) -> int | None:
    """The position of the series' highest finite value (the first of equals), or None."""
    best = None
    for index, value in enumerate(series.values):
        if value is not None and math.isfinite(value) and (best is None or value > series.values[best]):
            best = index
    return best


def _value_row(series: Series | None, plot_h: int, low: float, high: float) -> tuple[int, str] | None:
    """(the plot row of the series' current value, that value in short), or None."""
    if series is None:
        return None
    last = next((v for v in reversed(series.values) if v is not None and math.isfinite(v)), None)
    if last is None:
        return None
    span = (high - low) or 1.0
    dot = min(plot_h * 4 - 1, max(0, round((high - last) / span * (plot_h * 4 - 1))))
    return dot // 4, _short(last)


def tick_step(count: int, room: int) -> int:
    """An epoch step of 1, 2, 5, 10, 20, 50 ... that puts at most `room` labels on `count` epochs."""
    step = 1
    while True:
        for factor in (1, 2, 5):
            if count / (step * factor) <= max(1, room):
                return step * factor
        step *= 10


def x_axis(epochs: Sequence[int], width: int, best: int | None = None) -> str:
    """The x axis under a plot `width` cells wide: epoch numbers at round ticks under their columns, and ▲
    under the best epoch (`best`, a position in `epochs`)."""
    count = len(epochs)
    cells = ["─"] * width
    if count == 0 or width <= 0:
        return "".join(cells)

    def column(position: int) -> int:
        dots = width * 2
        return (0 if count == 1 else round(position * (dots - 1) / (count - 1))) // 2

    step = tick_step(max(epochs) - min(epochs) + 1, width // 6)
    free_from = 0
    for position, epoch in enumerate(epochs):
        if epoch % step and position != 0:
            continue
        label = str(epoch)
        start = min(column(position), width - len(label))
        if start < free_from:
            continue
        cells[start:start + len(label)] = label
        free_from = start + len(label) + 2
    if best is not None and 0 <= best < count:
        at = column(best)
        while at < width and cells[at] != "─":  # beside an epoch label, never over it
            at += 1
        if at >= width:
            at = column(best)
            while at > 0 and cells[at] != "─":
                at -= 1
        cells[at] = "▲"
    return "".join(cells)


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
