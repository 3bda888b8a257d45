"""A one-line path field that completes file and folder names as you type (Tab or → accepts).

The completion is shown greyed after the cursor (Textual's suggester): the first entry, in sorted order,
of the typed folder whose name starts with what follows the last `/`; folders end in `/` so Tab walks
down a tree. `suffixes` limits the files offered (folders are always offered).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from textual.binding import Binding
from textual.suggester import Suggester
from textual.widgets import Input

MAX_ENTRIES = 2000  # a huge folder is not listed whole for one completion


MAX_DEPTH = 8  # folders walked down in one completion


def complete_path(value: str, suffixes: Iterable[str] = (), base: Path | None = None) -> str | None:
    """`value` extended by the first matching entry of its folder, then on down while the way is clear: into a
    folder's only wanted file (`suffixes` given: `demo-data/` holding data.yaml, images/ and labels/ ends at
    data.yaml) or its only entry, so one Tab reaches the file; None when nothing matches."""
    completed = _complete_once(value, suffixes, base)
    for _ in range(MAX_DEPTH):
        if completed is None or not completed.endswith(os.sep):
            break
        entries = _candidates(completed, suffixes, base)
        files = [name for name in entries if not name.endswith(os.sep)]
        if suffixes and len(files) == 1:
            return completed + files[0]
        if len(entries) != 1:
            break
        completed += entries[0]
    return completed


def _candidates(value: str, suffixes: Iterable[str], base: Path | None) -> list[str]:
    """The entries of `value`'s folder that complete its last part (folders end in `/`), sorted."""
    expanded = os.path.expanduser(value)
    folder_text, prefix = os.path.split(expanded)
    folder = Path(folder_text or ".")
    if not folder.is_absolute() and base is not None:
        folder = base / folder
    suffixes = tuple(s.lower() for s in suffixes)
    try:
        entries = []
        with os.scandir(folder) as scan:
            for count, entry in enumerate(scan):
                if count >= MAX_ENTRIES:
                    break
                if entry.name.startswith(prefix) and (prefix.startswith(".") or not entry.name.startswith(".")):
                    entries.append(entry)
    except OSError:
        return []
    candidates: list[str] = []
    for entry in sorted(entries, key=lambda e: e.name):
        try:
            is_dir = entry.is_dir()
        except OSError:
            continue
        if is_dir:
            candidates.append(entry.name + os.sep)
        elif not suffixes or entry.name.lower().endswith(suffixes):
            candidates.append(entry.name)
    return candidates


def _complete_once(value: str, suffixes: Iterable[str], base: Path | None) -> str | None:
    if not value or value.endswith(os.sep + ".."):
        return None
    prefix = os.path.split(os.path.expanduser(value))[1]
    candidates = _candidates(value, suffixes, base)
    # Prefer an exact-prefix file match over descending into a folder with a longer name.
    for name in candidates:
        if name != prefix:
            return value + name[len(prefix):]
    return None


class PathSuggester(Suggester):
    """Suggests the completion of a typed path (see `complete_path`)."""

    def __init__(self, suffixes: Iterable[str] = (), base: Path | None = None) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.suffixes = tuple(suffixes)
        self.base = base

    async def get_suggestion(self, value: str) -> str | None:
        """The completed path, or None."""
        return complete_path(value, self.suffixes, self.base)


class PathInput(Input):
    """An Input for a file path with completion; Tab accepts the shown completion, else moves on."""

    BINDINGS = [Binding("tab", "complete", "Complete", show=False)]

    def __init__(self, value: str = "", *, suffixes: Iterable[str] = (), placeholder: str = "",
                 id: str | None = None, classes: str | None = None, compact: bool = True) -> None:
        super().__init__(value=value, placeholder=placeholder, suggester=PathSuggester(suffixes), id=id,
                         classes=classes, compact=compact)

    def action_complete(self) -> None:
        """Accept the completion shown after the cursor; with none, focus the next field."""
        if self._suggestion and self._suggestion != self.value and self.cursor_at_end:
            self.value = self._suggestion
            self.cursor_position = len(self.value)
        else:
            self.screen.focus_next()
