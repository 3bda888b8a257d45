"""Turning what the user typed (a path, or a run name) into a run folder."""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path

from yolotui.errors import UserError
from yolotui.runs import index
from yolotui.runs.layout import RESULTS_CSV, RUN_YAML, STATUS_JSON, WEIGHTS_DIR

_RUN_MARKERS = (STATUS_JSON, RUN_YAML, RESULTS_CSV, WEIGHTS_DIR)


def looks_like_run(folder: Path) -> bool:
    """True when `folder` holds any of a run's files (status.json, run.yaml, results.csv, weights/)."""
    return any((folder / marker).exists() for marker in _RUN_MARKERS)


def looks_like_path(value: str) -> bool:
    """True when `value` reads as a path (has a separator, or starts with `.` or `~`), not a plain run name."""
    return os.sep in value or value.startswith(("~", ".")) or (os.altsep is not None and os.altsep in value)


def exact_matches(value: str, entries: list | None = None) -> list:
    """The index entries named exactly `value`."""
    return [e for e in (index.entries() if entries is None else entries) if e.name == value]


def resolve_run(value: str) -> Path:
    """The run folder `value` names: an indexed run's exact name, a path to a run folder, else a name in the index.

    A plain name (no `/`, not starting with `.` or `~`) that one indexed run has exactly is that run, even when
    a folder of that name exists here; otherwise a folder path wins. Names are matched exactly first, then as a
    unique suffix of an indexed name or path (`exec/exp3`,
    `p3`). Raises UserError with close matches when nothing (or more than one run) matches.
    """
    if not value or not value.strip():
        raise UserError("no run given: name a run (see `yolotui ls`) or give its folder")
    entries = index.entries()
    if not looks_like_path(value):
        # A plain name is a run name: an exact match in the index wins over a folder of that name in the
        # current directory (`rm --files r1` elsewhere must not reach an unrelated ./r1).
        exact = exact_matches(value, entries)
        if len(exact) == 1:
            return Path(exact[0].path)
    candidate = Path(value).expanduser()
    if candidate.is_dir():
        if looks_like_run(candidate):
            return candidate.resolve()
        if looks_like_path(value):
            raise UserError(f"{candidate} is a folder but not a yolotui run (no status.json or run.yaml)")
        # a plain name that happens to be a local folder: look it up in the index below

    exact = exact_matches(value, entries)
    if len(exact) == 1:
        return Path(exact[0].path)
    if len(exact) > 1:
        raise UserError(f"run name {value!r} matches {len(exact)} runs: "
                        + ", ".join(e.path for e in exact[:5]) + "; give the folder instead")
    suffix = value.strip(os.sep)
    by_suffix = {e.path: e for e in entries
                 if e.name.endswith(suffix) or e.path.endswith(os.sep + suffix)}
    if len(by_suffix) == 1:
        return Path(next(iter(by_suffix)))
    if len(by_suffix) > 1:
        raise UserError(f"run {value!r} is ambiguous: it matches "
                        + ", ".join(sorted(e.name for e in by_suffix.values())[:8])
                        + "; give the full name or the folder")
    names = sorted({e.name for e in entries})
    close = difflib.get_close_matches(value, names, n=5, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else "; see `yolotui ls` for the runs yolotui knows"
    what = "no run folder or indexed run" if looks_like_path(value) else "unknown run"
    raise UserError(f"{what} {value!r}{hint}")


@dataclass(frozen=True)
class FinetuneSource:
    """A resolved --from: the checkpoint file and the run folder it belongs to (None for a loose file)."""

    checkpoint: Path
    run_dir: Path | None


def resolve_source(value: str) -> FinetuneSource:
    """The checkpoint and run folder a --from value names; UserError when it holds no weights yet."""
    path = Path(value).expanduser()
    if path.is_file():
        run_dir = path.parent.parent if path.parent.name == "weights" else None
        known = run_dir is not None and ((run_dir / "opt.yaml").exists() or (run_dir / "args.yaml").exists())
        return FinetuneSource(path.resolve(), run_dir.resolve() if known and run_dir is not None else None)
    if path.is_dir() and ((path / "opt.yaml").exists() or (path / "args.yaml").exists()):  # args.yaml: ultralytics'
        run_dir = path.resolve()
    else:
        run_dir = Path(resolve_run(value))
    for name in ("best.pt", "last.pt"):
        candidate = run_dir / "weights" / name
        if candidate.is_file():
            return FinetuneSource(candidate, run_dir)
    raise UserError(f"--from {value}: {run_dir} has no weights/best.pt or last.pt yet")
