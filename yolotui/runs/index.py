"""The global index of run directories, so `yolotui` started from any folder finds every run.

Lives under the user's state directory (platformdirs), or under `$YOLOTUI_HOME` when set (tests).
One JSON object a line, appended; entries whose folder is gone are dropped on read.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from yolotui.runs.atomic import atomic_write_text
from yolotui.runs.events import parse_lines

INDEX_FILE = "runs.jsonl"


def home_dir() -> Path:
    """yolotui's own state folder: `$YOLOTUI_HOME`, else the platform's user state directory."""
    env = os.environ.get("YOLOTUI_HOME")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_state_dir

    return Path(user_state_dir("yolotui"))


def config_dir() -> Path:
    """yolotui's settings folder: `$YOLOTUI_HOME/config`, else the platform's user config directory."""
    env = os.environ.get("YOLOTUI_HOME")
    if env:
        return Path(env).expanduser() / "config"
    from platformdirs import user_config_dir

    return Path(user_config_dir("yolotui"))


def index_path() -> Path:
    """The index file."""
    return home_dir() / INDEX_FILE


class IndexEntry:
    """One indexed run: its folder (absolute), the name it was given, and when it was added.

    A plain class, not a dataclass: `yolotui ls` imports this and `dataclasses` costs ~20 ms to import.
    """

    __slots__ = ("path", "name", "added")

    def __init__(self, path: str, name: str, added: float) -> None:
        self.path = path
        self.name = name
        self.added = added

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IndexEntry) and (self.path, self.name, self.added) == (
            other.path, other.name, other.added)

    def __hash__(self) -> int:
        return hash((self.path, self.name, self.added))

    def __repr__(self) -> str:
        return f"IndexEntry(path={self.path!r}, name={self.name!r}, added={self.added!r})"


def check_home() -> Path:
    """yolotui's state folder, created if needed; UserError (one line) when it cannot be written.

    Called before a run folder is made, so an unwritable YOLOTUI_HOME leaves nothing half-made behind.
    """
    from yolotui.errors import UserError

    home = home_dir()
    try:
        home.mkdir(parents=True, exist_ok=True)
        probe = home / f".write-probe-{os.getpid()}"
        with open(probe, "wb"):
            pass
        probe.unlink()
    except OSError as exc:
        raise UserError(f"yolotui's state folder {home} is not writable ({exc.strerror or exc}); set YOLOTUI_HOME "
                        "to a writable folder or fix its permissions") from None
    return home


def add(run_dir: Path, name: str | None = None) -> IndexEntry:
    """Record a run directory in the index (appending is safe against concurrent launchers)."""
    run_dir = Path(run_dir).resolve()
    entry = IndexEntry(str(run_dir), name or run_dir.name, time.time())
    path = index_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"path": entry.path, "name": entry.name, "added": entry.added}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)
    return entry


def _parse_rows(data: bytes) -> list:
    """The index's JSON lines; one json.loads for the whole file, line by line only if some line is bad."""
    lines = [line for line in data.split(b"\n") if line.strip()]
    try:
        rows = json.loads(b"[" + b",".join(lines) + b"]")
    except ValueError:
        rows, _ = parse_lines(data if data.endswith(b"\n") else data + b"\n")
    return rows


def entries(check_exists: bool = True) -> list[IndexEntry]:
    """Every indexed run whose folder still exists, newest first, one entry per folder.

    With `check_exists=False` vanished folders are kept (a caller that stats the folder anyway).
    """
    try:
        data = index_path().read_bytes()
    except OSError:
        return []
    latest: dict[str, IndexEntry] = {}
    for row in _parse_rows(data):
        try:
            entry = IndexEntry(str(row["path"]), str(row.get("name") or ""), float(row.get("added") or 0))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        latest[entry.path] = entry
    alive = [e for e in latest.values() if not check_exists or os.path.isdir(e.path)]
    alive.sort(key=lambda e: e.added, reverse=True)
    return alive


def remove(run_dir: Path) -> None:
    """Drop a run from the index (its folder is left alone)."""
    target = str(Path(run_dir).resolve())
    kept = [e for e in entries() if e.path != target]
    lines = "".join(json.dumps({"path": e.path, "name": e.name, "added": e.added}) + "\n" for e in reversed(kept))
    atomic_write_text(index_path(), lines)
