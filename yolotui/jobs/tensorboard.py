"""`yolotui tensorboard`: which folders of which runs hold TensorBoard event files, and the command that shows them.

- Engine runs write their event files into the run folder (yolotui/engine/trackers/tensorboard.py).
- Official runs: the official trainer writes its own event files into its save_dir (run.yaml's
  `official.save_dir`, the run folder for runs yolotui started).
- Any backend that records a `save_dir` in run.yaml (e.g. an ultralytics trainer's save_dir): that folder too.

TensorBoard runs as `python -m tensorboard.main` of this interpreter (the `tensorboard` extra), on localhost:
`--logdir FOLDER` for one folder, `--logdir_spec NAME:FOLDER,...` for several, each named after its run.
Torch-free; nothing here prints or serves (commands/tensorboard.py does).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from yolotui.errors import UserError

EVENT_FILE_PREFIX = "events.out.tfevents."
SEARCH_DEPTH = 3  # a run's event files are in its folder or a few levels down (W&B's, an earlier life's)
SEARCH_ENTRIES = 5000  # directory entries looked at per folder, at most
DEFAULT_PORT = 6006
DEFAULT_HOST = "127.0.0.1"
OWN = "yolotui's event files"


@dataclass
class RunLogs:
    """One run and its folders that hold event files (empty: nothing to show, `note` says why)."""

    name: str
    run_dir: Path
    folders: list[Path] = field(default_factory=list)
    note: str = ""


def has_event_files(folder: Path, depth: int = SEARCH_DEPTH) -> bool:
    """True when `folder` or a subfolder (up to `depth` levels, bounded) holds a TensorBoard event file."""
    budget = [SEARCH_ENTRIES]

    def _walk(path: Path, level: int) -> bool:
        try:
            entries = os.scandir(path)
        except OSError:
            return False
        subfolders = []
        with entries:
            for entry in entries:
                budget[0] -= 1
                if budget[0] < 0:
                    return False
                if entry.name.startswith(EVENT_FILE_PREFIX) and entry.is_file(follow_symlinks=False):
                    return True
                if level < depth and entry.is_dir(follow_symlinks=False) and entry.name not in ("weights",):
                    subfolders.append(Path(entry.path))
        return any(_walk(sub, level + 1) for sub in subfolders)

    return _walk(Path(folder), 0)


def candidate_folders(run_dir: Path) -> list[tuple[Path, str]]:
    """(folder, what it is) where the run's event files may be, the run's own first, no duplicates."""
    from yolotui.backends import get_backend
    from yolotui.errors import UserError
    from yolotui.runs.runconfig import read_backend, run_yaml_field
    from yolotui.runs.trackers import tensorboard_dir

    run_dir = Path(run_dir)
    backend = read_backend(run_dir)
    try:
        found = list(get_backend(backend).tensorboard_folders(run_dir))
    except UserError:  # a backend this install does not know: its folders are unknown too
        found = []
    save_dir = run_yaml_field(run_dir, "save_dir")
    if isinstance(save_dir, str) and save_dir:
        found.append((Path(save_dir), f"the {backend} trainer's save_dir"))
    found.append((tensorboard_dir(run_dir), OWN))
    unique: list[tuple[Path, str]] = []
    seen: set[str] = set()
    for folder, what in found:
        key = os.path.realpath(folder)
        if key not in seen:
            seen.add(key)
            unique.append((folder, what))
    return unique


def run_logs(run_dir: Path, name: str | None = None) -> RunLogs:
    """The run's folders that hold event files."""
    from yolotui.runs.trackers import read_settings

    run_dir = Path(run_dir)
    logs = RunLogs(name or run_dir.name, run_dir)
    for folder, _ in candidate_folders(run_dir):
        if folder.is_dir() and has_event_files(folder):
            logs.folders.append(folder)
    if not logs.folders:
        off = not read_settings(run_dir).tensorboard
        logs.note = "TensorBoard is off for this run (--no-tensorboard)" if off else "no TensorBoard event files yet"
    return logs


def choose_runs(names: list[str]) -> list[RunLogs]:
    """The runs named (resolved as everywhere), or every run yolotui knows when none is named."""
    from yolotui.runs import index
    from yolotui.runs.resolve import resolve_run

    if names:
        chosen = [(resolve_run(n), None) for n in names]
    else:
        chosen = [(Path(e.path), e.name or None) for e in index.entries()]
    seen: set[str] = set()
    out = []
    for run_dir, name in chosen:
        if str(run_dir) in seen:
            continue
        seen.add(str(run_dir))
        out.append(run_logs(run_dir, name))
    return out


def _label(text: str) -> str:
    return "".join("_" if c in ",:" or c.isspace() else c for c in text) or "run"


def logdir_arguments(runs: list[RunLogs]) -> list[str]:
    """TensorBoard's --logdir / --logdir_spec arguments for the runs' folders; UserError when there are none."""
    pairs: list[tuple[str, Path]] = []
    used: set[str] = set()
    for run in runs:
        for i, folder in enumerate(run.folders):
            base = _label(run.name if i == 0 else f"{run.name}/{folder.name}")
            label, n = base, 2
            while label in used:
                label, n = f"{base}-{n}", n + 1
            used.add(label)
            pairs.append((label, folder))
    if not pairs:
        why = "; ".join(f"{r.name}: {r.note}" for r in runs[:5]) or "no runs (see `yolotui ls`)"
        raise UserError(f"nothing to show in TensorBoard: {why}")
    if len(pairs) == 1:
        return ["--logdir", str(pairs[0][1])]
    for _, folder in pairs:
        if "," in str(folder):
            raise UserError(f"{folder}: TensorBoard cannot take a folder with ',' among several; "
                            "name that run alone (`yolotui tensorboard RUN`)")
    return ["--logdir_spec", ",".join(f"{label}:{folder}" for label, folder in pairs)]


def tensorboard_command(runs: list[RunLogs], host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                        python: str | None = None) -> list[str]:
    """The argv that serves the runs' event files on host:port; UserError naming the extra when TensorBoard
    is not installed here."""
    from yolotui.runs.trackers import install_hint, installed

    if not installed("tensorboard"):
        raise UserError(f"{install_hint('tensorboard')}; then `yolotui tensorboard` again")
    if not 0 <= int(port) <= 65535:
        raise UserError(f"--port {port}: give a port from 0 to 65535")
    return [python or sys.executable, "-m", "tensorboard.main", *logdir_arguments(runs), "--host", host,
            "--port", str(int(port))]


def status_lines(run_dir: Path) -> list[str]:
    """`status` lines about the run's trackers: yolotui's (with failures), and where a backend's own event
    files are (the official trainer's)."""
    from yolotui.runs.runconfig import read_backend
    from yolotui.runs.trackers import labelled, summary_lines

    run_dir = Path(run_dir)
    if read_backend(run_dir) == "yolotui":
        return summary_lines(run_dir)
    lines = []
    for folder, what in candidate_folders(run_dir):
        if what == OWN:  # the engine's: not written by other backends
            continue
        present = "" if folder.is_dir() and has_event_files(folder) else " (none there yet)"
        lines.append(f"tensorboard: {folder} ({what}){present}")
    return labelled(lines)
