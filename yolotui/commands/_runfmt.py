"""Formatting shared by the run commands (ls, status, stop): ages, times, epochs, plain tables."""

from __future__ import annotations

import time
from collections.abc import Sequence


def age(seconds: float | None) -> str:
    """'42s', '5m', '3h', '2d'; '-' when unknown."""
    if seconds is None:
        return "-"
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def when(ts: float | None) -> str:
    """Local 'YYYY-MM-DD HH:MM' for a unix time; '-' when unknown."""
    if not ts:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def epoch_text(epoch: int | None, epochs: int | None) -> str:
    """'3/100', '3/?', '-'."""
    if epoch is None and epochs is None:
        return "-"
    return f"{epoch if epoch is not None else 0}/{epochs if epochs is not None else '?'}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces."""
    lines = [header, *rows]
    widths = [max(len(line[col]) for line in lines) for col in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines)


def emit(text: str) -> None:
    """Print `text`; when the reader has gone (`yolotui ls | head`), end quietly instead of a traceback."""
    import os
    import sys

    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush does not fail again
