"""Plain tables for the run commands (ls, status, stop), with the shared formatter's `-` for unknowns."""

from __future__ import annotations

from collections.abc import Sequence

from yolotui import formatting


def age(seconds: float | None) -> str:
    """'42s', '5m', '3h', '2d' (yolotui.formatting); '-' when unknown."""
    return formatting.age(seconds, unknown="-")


def when(ts: float | None) -> str:
    """Local 'YYYY-MM-DD HH:MM' for a unix time; '-' when unknown."""
    return formatting.when(ts, unknown="-")


def duration(seconds: float | None) -> str:
    """'4:05', '1:02:03' (yolotui.formatting); '-' when unknown."""
    return formatting.duration(seconds, unknown="-")


def epoch_text(epoch: int | None, epochs: int | None) -> str:
    """'3/100' = 3 epochs done of 100 (yolotui.formatting's one epoch numbering), '3/?', '-'."""
    return formatting.epochs(epoch, epochs, unknown="-")


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces; control characters in a cell (a run name with an ANSI
    escape, say) are shown escaped (formatting.printable), never sent to the terminal."""
    lines = [[formatting.printable(cell) for cell in line] for line in (header, *rows)]
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
