"""Reading train.log for people: the final state of each progress-bar line, repeated tracebacks collapsed.

Progress bars (tqdm, the official trainer's) redraw one line with carriage returns: the file holds every redraw
("  0%|...\r 50%|...\r100%|...\n"). A reader shows only what a terminal would have left on screen: the text
after the line's last carriage return. The official trainer also plots in background threads; a plotting bug
(e.g. Pillow >= 10) prints the same traceback for every batch it plots. The second and later copies of a
traceback (compared with thread names and numbers normalised) become one line saying so.

`LogCleaner` keeps its state between calls, so the dashboard can feed it the new lines of each poll and
`yolotui logs --follow` each chunk it reads; `clean_text` does a whole text at once. The file is never changed.
"""

from __future__ import annotations

import re

_THREAD = re.compile(r"Thread-\d+|\b0x[0-9a-f]+\b|line \d+")
_BLOCK_START = re.compile(r"^(Exception in thread .*|Traceback \(most recent call last\):)$")


def final_state(line: str) -> str:
    """What a terminal shows for one line written with carriage returns: the text after the last one."""
    if "\r" not in line:
        return line
    parts = [part for part in line.split("\r") if part.strip()]
    return parts[-1] if parts else ""


class LogCleaner:
    """Turns raw train.log lines into display lines (see the module docstring); feed it lines in order."""

    def __init__(self) -> None:
        self.block: list[str] | None = None  # the traceback being collected
        self.seen: dict[str, int] = {}  # normalised traceback -> times seen

    def feed(self, lines: list[str]) -> list[str]:
        """Display lines for `lines` (whole lines, without their newline)."""
        out: list[str] = []
        for raw in lines:
            line = final_state(raw)
            if self.block is not None:
                self.block.append(line)
                if _is_block_end(line, self.block):
                    out.extend(self._close_block())
                continue
            if _BLOCK_START.match(line.strip()):
                self.block = [line]
                continue
            out.append(line)
        return out

    def flush(self) -> list[str]:
        """The traceback still being collected (at the end of the text), as it is."""
        if self.block is None:
            return []
        block, self.block = self.block, None
        return block

    def _close_block(self) -> list[str]:
        block, self.block = self.block or [], None
        key = _THREAD.sub("#", "\n".join(block))
        count = self.seen.get(key, 0) + 1
        self.seen[key] = count
        if count == 1:
            return block
        return [f"[yolotui: the same traceback again ({count} times so far): {block[-1].strip()[:160]}]"]


def _is_block_end(line: str, block: list[str]) -> bool:
    """The exception line ends a traceback: text at column 0 after the "Traceback" header and frames."""
    if not line or line[0].isspace() or len(block) < 3:
        return False
    if _BLOCK_START.match(line.strip()):  # "Exception in thread" is followed by its own Traceback header
        return False
    return line.startswith(("During handling", "The above exception")) is False


def clean_text(text: str) -> list[str]:
    """Display lines for a whole text (a trailing partial line included)."""
    cleaner = LogCleaner()
    return cleaner.feed(text.split("\n")) + cleaner.flush()
