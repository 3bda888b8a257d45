"""One-line sparklines in block characters, for the GPU panel's minute of history."""

from __future__ import annotations

from collections.abc import Sequence

BLOCKS = " ▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float | None], width: int, low: float = 0.0, high: float | None = None) -> str:
    """The last `width` values as block characters scaled to [low, high] (high: the max seen)."""
    recent = list(values)[-width:] if width > 0 else []
    finite = [v for v in recent if v is not None]
    if not finite:
        return " " * max(0, width)
    top = high if high is not None else max(finite)
    span = (top - low) or 1.0
    chars = []
    for value in recent:
        if value is None:
            chars.append(" ")
            continue
        level = round((min(max(value, low), top) - low) / span * (len(BLOCKS) - 1))
        chars.append(BLOCKS[max(1, level)])
    return "".join(chars).rjust(width)


def bar(fraction: float | None, width: int, fill: str = "█", empty: str = "░") -> str:
    """A horizontal bar `width` cells long, `fraction` of it filled."""
    if width <= 0:
        return ""
    if fraction is None:
        return empty * width
    filled = round(min(1.0, max(0.0, fraction)) * width)
    return fill * filled + empty * (width - filled)
