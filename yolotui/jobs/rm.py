"""Forget runs: drop ended runs from the index, and with `files` delete their folders too. Live runs are refused.

What may be deleted is narrow on purpose (a deleted folder does not come back):

- a plain name is an indexed run's name first (exact match), never a folder of that name in the current
  directory that happens to be there; a path names that folder;
- nothing is deleted through a symbolic link: a link given as the run (or an indexed folder that has become
  a link, or sits under a folder that has) is refused, and the deletion itself never follows links inside;
- only folders with a status.json (a regular file) are deleted: a folder with only `weights/` or a
  results.csv is no run yolotui made;
- a run folder that is not in the index is deleted only when `confirm(folder)` says yes (the CLI asks on a
  terminal); without a `confirm` it is refused.

Every run is checked (and every question asked) before anything is removed.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from yolotui.errors import UserError


@dataclass
class RemoveRequest:
    """Remove `runs` (names or folders). `files`: also delete each run folder from disk. `confirm(folder)`:
    asked before deleting a folder that is not in the index (None: such a folder is refused)."""

    runs: list[str]
    files: bool = False
    confirm: Callable[[Path], bool] | None = None


@dataclass
class RemoveResult:
    """The run folders dropped from the index, and those of them deleted from disk."""

    removed: list[Path] = field(default_factory=list)
    deleted: list[Path] = field(default_factory=list)


def _no_link_folder(given: Path) -> Path:
    """`given` as an absolute path whose parents are resolved but whose last part is not followed."""
    absolute = Path(os.path.abspath(os.path.normpath(os.path.expanduser(str(given)))))
    return absolute.parent.resolve() / absolute.name


def _is_link(path: Path) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def _has_status_file(run_dir: Path) -> bool:
    """True when RUN/status.json exists as a regular file (not a link)."""
    from yolotui.runs.layout import STATUS_JSON

    try:
        return stat.S_ISREG(os.lstat(run_dir / STATUS_JSON).st_mode)
    except OSError:
        return False


def target_folder(value: str, entries: list | None = None, files: bool = True) -> tuple[Path, bool]:
    """(run folder, in the index?) for one RUN argument of `rm`; UserError for an unknown run, and (when its
    files are to be deleted) for a symbolic link."""
    from yolotui.runs import index
    from yolotui.runs.resolve import exact_matches, looks_like_path, resolve_run

    entries = index.entries() if entries is None else entries
    indexed = {e.path for e in entries}
    if not value or not value.strip():
        raise UserError("no run given: name the runs to remove (see `yolotui ls`)")
    if not looks_like_path(value):
        exact = exact_matches(value, entries)
        if len(exact) == 1:
            return Path(exact[0].path), True
    given = Path(os.path.normpath(os.path.expanduser(value)))  # normpath: "link/" names the link itself
    if not files:  # forgetting deletes nothing: a link to an indexed run forgets that run
        folder = Path(resolve_run(value))
        return folder, str(folder) in indexed
    if _is_link(given):
        raise UserError(f"{value}: is a symbolic link; yolotui never removes a run through a link (give the "
                        "folder it points to, or the run's name); nothing was removed")
    if given.is_dir():
        folder = _no_link_folder(given)
    else:
        folder = Path(resolve_run(value))  # the index's suffix matches and close-match hints
    return folder, str(folder) in indexed


def _check_indexed_path(run_dir: Path) -> None:
    """An indexed folder must still be the folder it was: no part of its path may have become a link."""
    if _is_link(run_dir) or run_dir.resolve() != run_dir:
        raise UserError(f"{run_dir}: the indexed run folder is now (or sits under) a symbolic link to "
                        f"{run_dir.resolve()}; yolotui never removes a run through a link; nothing was removed")


def remove(request: RemoveRequest) -> RemoveResult:
    """Check every run first (all must be ended: finished, failed, stopped or interrupted), then remove them."""
    from yolotui.runs import index, lock
    from yolotui.runs.layout import ENDED_STATES
    from yolotui.runs.status import effective_state

    if not request.runs:
        raise UserError("no run given: name the runs to remove (see `yolotui ls`)")
    entries = index.entries()
    folders: list[tuple[Path, bool]] = []
    for value in request.runs:
        run_dir, indexed = target_folder(value, entries, request.files)
        if indexed and request.files:
            _check_indexed_path(run_dir)
        has_status = _has_status_file(run_dir)
        if not indexed and not has_status:
            raise UserError(f"{run_dir}: not a run yolotui made (no status.json) and not in its list of runs; "
                            "nothing was removed")
        if not indexed and not request.files:
            raise UserError(f"{run_dir}: not in yolotui's list of runs (`yolotui ls`): nothing to forget; "
                            "nothing was removed")
        if request.files and not has_status:
            raise UserError(f"{run_dir}: has no status.json, so it is no run folder yolotui made: its files are "
                            f"not deleted (forget it with `yolotui rm {shlex.quote(str(run_dir))}` without "
                            "--files); nothing was removed")
        state = effective_state(run_dir) if has_status else "ended"
        if state in ENDED_STATES:
            _wait_for_release(run_dir)  # a supervisor that has just recorded the end exits a moment later
        if lock.is_held(run_dir) or (has_status and state not in ENDED_STATES):
            raise UserError(f"run {run_dir.name} is {state if has_status else 'live'}: stop it first "
                            f"(yolotui stop {shlex.quote(str(run_dir))}); nothing was removed")
        if run_dir not in [f for f, _ in folders]:
            folders.append((run_dir, indexed))
    for run_dir, indexed in folders:
        if request.files and not indexed and not (request.confirm and request.confirm(run_dir)):
            raise UserError(f"{run_dir}: not in yolotui's list of runs (`yolotui ls`), so it is deleted only when "
                            "you confirm it on a terminal; nothing was removed")
    result = RemoveResult()
    for run_dir, indexed in folders:
        if indexed:
            index.remove(run_dir)
            result.removed.append(run_dir)
        if request.files:
            if _is_link(run_dir):  # swapped for a link since the check: still never followed
                raise UserError(f"{run_dir}: became a symbolic link; not deleted")
            try:
                shutil.rmtree(run_dir)  # fd-based on Linux: never follows a link inside the folder
            except OSError as exc:
                raise UserError(f"{run_dir}: could not delete ({exc.strerror or exc}); it is no longer "
                                "listed") from exc
            if not indexed:
                result.removed.append(run_dir)
            result.deleted.append(run_dir)
    return result


def _wait_for_release(run_dir: Path, seconds: float = 2.0) -> None:
    """Give the run's last process up to `seconds` to let go of its lock."""
    import time

    from yolotui.runs import lock

    deadline = time.monotonic() + seconds
    while lock.is_held(run_dir) and time.monotonic() < deadline:
        time.sleep(0.02)
