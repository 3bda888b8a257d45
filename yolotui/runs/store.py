"""Creating run directories: name checks and the official numbering (`exp`, `exp2`, `exp3` ...)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from yolotui.errors import UserError

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


MAX_NAME = 100
_NAME_OK = re.compile(r"[A-Za-z0-9._-]+")


def validate_name(name: str) -> str:
    """Return `name` if it is a safe single folder name, else raise UserError saying why.

    Run names are letters, digits, '.', '_' and '-', do not start with '-' (it would read as a flag in the
    commands yolotui suggests) and have at most 100 characters.
    """
    if not name or not name.strip():
        raise UserError("run name is empty: give --name a folder name such as 'exp'")
    if len(name) > MAX_NAME:
        raise UserError(f"run name {name[:20]!r}... has {len(name)} characters: use at most {MAX_NAME}")
    if _CONTROL.search(name):
        raise UserError(f"run name {name!r} contains control characters: use letters, digits, '-', '_' or '.'")
    if "/" in name or "\\" in name or (os.sep in name):
        raise UserError(f"run name {name!r} contains a path separator: use --project for the parent folder")
    if name in (".", "..") or ".." in name:
        raise UserError(f"run name {name!r} contains '..': use a plain folder name")
    if name.startswith("-"):
        raise UserError(f"run name {name!r} starts with '-': start it with a letter or digit")
    if not _NAME_OK.fullmatch(name):
        bad = sorted({ch for ch in name if not _NAME_OK.fullmatch(ch)})
        raise UserError(f"run name {name!r} contains {''.join(bad)!r}: use letters, digits, '.', '_' or '-'")
    return name


def next_free_path(project: Path, name: str) -> Path:
    """`project/name`, or the first free `project/name2`, `name3` ... as the official trainer numbers them."""
    base = Path(project) / name
    if not base.exists():
        return base
    n = 2
    while (Path(project) / f"{name}{n}").exists():
        n += 1
    return Path(project) / f"{name}{n}"


def check_writable(project: Path) -> None:
    """Raise UserError unless `project` exists as a writable folder or can be created."""
    project = Path(project)
    probe = project
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise UserError(f"project folder {project}: {probe} is not a folder; choose another --project")
    if not os.access(probe, os.W_OK | os.X_OK) or not _can_create_in(probe):
        raise UserError(f"project folder {project} is not writable: choose another --project or fix its permissions")


def _can_create_in(folder: Path) -> bool:
    """Create and remove a probe file: permission bits alone miss read-only mounts and root's view."""
    probe = folder / f".yolotui-write-probe-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return True
    except OSError:
        return False
    os.close(fd)
    try:
        os.unlink(probe)
    except OSError:
        pass
    return True


def create_run_dir(project: Path, name: str, exist_ok: bool = False) -> Path:
    """Create and return the run folder `project/name` (numbered unless `exist_ok`), with weights/."""
    from yolotui.runs.index import check_home

    validate_name(name)
    check_writable(project)
    check_home()  # an unwritable state folder is found before any run folder is made
    path = Path(project) / name if exist_ok else next_free_path(project, name)
    try:
        (path / "weights").mkdir(parents=True, exist_ok=exist_ok)
    except FileExistsError:
        # Another launcher took the same number between our check and mkdir: take the next one.
        return create_run_dir(project, name, exist_ok)
    except OSError as exc:
        raise UserError(f"cannot create run folder {path}: {exc.strerror}; choose another --project") from exc
    return path.resolve()


def claim_run_dir(project: Path, name: str, exist_ok: bool, who: str) -> tuple[Path, int]:
    """Create the run folder and take its lock for `who`: (folder, lock descriptor).

    Nothing in the folder is touched before the lock is ours; a reused folder (`exist_ok`) then has the
    earlier run's logs and records set aside (`set_aside_previous`). RunBusy names the owner when another
    process has the run. Hand the descriptor to `launcher.launch(lock_fd=...)` or close it (`lock.release`).
    """
    from yolotui.runs import lock

    path = create_run_dir(project, name, exist_ok)
    fd = lock.claim(path, who)
    try:
        if exist_ok:
            set_aside_previous(path)
    except BaseException:
        lock.release(fd)
        raise
    return path, fd


# The files of one life of a run folder: a reused folder (--exist-ok) starts without them.
PREVIOUS_FILES = ("status.json", "events.jsonl", "batches.jsonl", "batches.1.jsonl", "results.csv", "train.log",
                  "train.1.log", "supervisor.log", "supervisor.1.log", "stop.request")


def set_aside_previous(run_dir: Path) -> Path | None:
    """Move an earlier run's logs and records into `previous-<time>/` so a new run never mixes with them.

    Used when `--exist-ok` reuses a folder; returns the folder they went to, or None when
    there was nothing to move. Symlinks are moved as links, never followed.
    """
    import time

    run_dir = Path(run_dir)
    found = [run_dir / name for name in PREVIOUS_FILES if os.path.lexists(run_dir / name)]
    if not found:
        return None
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = run_dir / f"previous-{stamp}"
    n = 2
    while os.path.lexists(target):
        target = run_dir / f"previous-{stamp}-{n}"
        n += 1
    try:
        target.mkdir()
        for path in found:
            os.replace(path, target / path.name)
    except OSError as exc:
        raise UserError(f"cannot set aside the earlier run's files in {run_dir}: {exc.strerror}; "
                        "choose another --name") from exc
    return target
