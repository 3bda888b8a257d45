"""The global index of run directories, so `yolotui` started from any folder finds every run.

Lives under the user's state directory (platformdirs), or under `$YOLOTUI_HOME` when set (tests).
One JSON object a line, appended; entries whose folder is gone are dropped on read. The file is the user's
own (mode 0600). A damaged index is never a crash nor a silent "no runs": lines that are not run records
(garbage, JSON nested too deep to parse) are skipped, an index over MAX_INDEX_BYTES is not read at all, and
`last_problem()` says what was wrong with the latest read, naming the file, for `yolotui ls` and the TUI.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from yolotui.runs.atomic import atomic_write_text

INDEX_FILE = "runs.jsonl"
MAX_INDEX_BYTES = 32 * 2**20  # ~200,000 runs; a bigger file is no index yolotui wrote
_last_problem: list = [None]  # what was wrong with the latest read (see last_problem)


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
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        _owner_only(fd)
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)
    return entry


def _owner_only(fd: int) -> None:
    """Make an index written before it was created 0600 the user's own again (when it is ours)."""
    try:
        st = os.fstat(fd)
        if st.st_mode & 0o077 and st.st_uid == os.geteuid():
            os.fchmod(fd, st.st_mode & 0o700)
    except OSError:
        pass


def _loads(line: bytes):
    try:
        return json.loads(line)
    except (ValueError, RecursionError):  # garbage, or nesting too deep for the parser
        return None


def _parse_rows(data: bytes) -> tuple[list, int]:
    """The index's JSON lines and how many lines were unreadable; one json.loads for the whole file, line by
    line only if some line is bad."""
    lines = [line for line in data.split(b"\n") if line.strip()]
    try:
        rows = json.loads(b"[" + b",".join(lines) + b"]")
    except (ValueError, RecursionError):
        rows = [_loads(line) for line in lines]
    return rows, sum(1 for row in rows if not isinstance(row, dict))


def last_problem() -> str | None:
    """What was wrong with the index at the latest `entries()` (one line naming the file), or None."""
    return _last_problem[0]


def entries(check_exists: bool = True) -> list[IndexEntry]:
    """Every indexed run whose folder still exists, newest first, one entry per folder.

    With `check_exists=False` vanished folders are kept (a caller that stats the folder anyway). A damaged
    index gives what can be read of it; `last_problem()` says what could not.
    """
    _last_problem[0] = None
    path = index_path()
    try:
        size = os.stat(path).st_size
        if size > MAX_INDEX_BYTES:
            _last_problem[0] = (f"the run index {path} is {size / 2**20:.0f} MiB, over the {MAX_INDEX_BYTES // 2**20} "
                                "MiB an index may have, so it was not read; move it away (yolotui starts a new one "
                                "with the runs launched from then on)")
            return []
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as exc:
        _last_problem[0] = f"the run index {path} cannot be read ({exc.strerror or exc})"
        return []
    latest: dict[str, IndexEntry] = {}
    rows, bad = _parse_rows(data)
    for row in rows:
        try:
            entry = IndexEntry(str(row["path"]), str(row.get("name") or ""), float(row.get("added") or 0))
        except (KeyError, TypeError, ValueError, AttributeError):
            bad += isinstance(row, dict)
            continue
        latest[entry.path] = entry
    if bad:
        _last_problem[0] = (f"the run index {path}: {bad} of {len(rows)} line(s) are not run records and were "
                            "skipped" if latest else
                            f"the run index {path} is unreadable ({bad} line(s), none a run record); move it away "
                            "(yolotui starts a new one) or repair it")
    alive = [e for e in latest.values() if not check_exists or os.path.isdir(e.path)]
    alive.sort(key=lambda e: e.added, reverse=True)
    return alive


def name_for(run_dir: Path) -> str:
    """The name a relaunched run is indexed under: its index name when the folder is indexed, else the folder's
    name; never the name its run.yaml claims (a planted folder could claim another run's name)."""
    target = str(Path(run_dir).resolve())
    for entry in entries(check_exists=False):
        if entry.path == target and entry.name:
            return entry.name
    return Path(target).name


def remove(run_dir: Path) -> None:
    """Drop a run from the index (its folder is left alone)."""
    from yolotui.errors import UserError

    target = str(Path(run_dir).resolve())
    current = entries()
    problem = last_problem()
    if problem and not current:
        raise UserError(f"{problem}; nothing was removed")  # never rewrite an index that could not be read
    kept = [e for e in current if e.path != target]
    lines = "".join(json.dumps({"path": e.path, "name": e.name, "added": e.added}) + "\n" for e in reversed(kept))
    atomic_write_text(index_path(), lines)
