"""Restore a mirrored run on this machine: `yolotui restore TARGET/RUN_NAME [--project DIR]` (the use case).

The mirror is fetched into a hidden folder beside the destination (PROJECT/RUN_NAME, PROJECT defaulting to
runs/train as for `yolotui train`), settled and checked (yolotui.mirror.pull: every checkpoint against its
manifest), and only then moved into place, so a refused restore leaves nothing behind. The run's recorded
paths are rewritten for the new place: status.json's run_dir, opt.yaml's save_dir and project, run.yaml's
command (the old run folder in its arguments, and this machine's Python for a yolotui-engine run whose
interpreter is not here) and cwd. The run is added to the index; `yolotui resume PROJECT/RUN_NAME` continues
it exactly from its last.pt.

Refused with one line: a destination that is a live run (always), a destination folder that is not empty
(unless `force`: then the mirror's files replace theirs), a mirror with no run, a checkpoint whose bytes are not
the ones its manifest names. (The job layer is full, so this use case lives with the mirror; it imports only
the run-folder contract below it.)
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yolotui.errors import UserError
from yolotui.mirror import pull
from yolotui.mirror.target import check_usable, split_run
from yolotui.runs import index, lock
from yolotui.runs.layout import LAST_PT, LIVE_STATES, OPT_YAML, WEIGHTS_DIR, manifest_path

DEFAULT_PROJECT = "runs/train"
ENGINE_BACKEND = "yolotui"


@dataclass
class RestoreRequest:
    """`source`: TARGET/RUN_NAME; `project`: the folder that gets RUN_NAME (default runs/train); `force`:
    replace the files of a non-empty destination that is not a live run."""

    source: str
    project: str | None = None
    force: bool = False


@dataclass
class RestoreResult:
    """A restored run: where it is now, where from, its state and checkpoint, and what is worth a line."""

    name: str
    run_dir: Path
    source: str
    state: str
    epoch: int | None = None
    epochs: int | None = None
    step: int | None = None
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """What `yolotui restore --json` prints."""
        return {"name": self.name, "folder": str(self.run_dir), "source": self.source, "state": self.state,
                "epoch": self.epoch, "epochs": self.epochs, "step": self.step, "files": list(self.files),
                "notes": list(self.notes), "warnings": list(self.warnings)}


def _refuse_live(run_dir: Path) -> None:
    from yolotui.runs.status import effective_state

    if run_dir.is_dir() and (lock.is_held(run_dir) or effective_state(run_dir) in LIVE_STATES):
        owner = lock.owner(run_dir) or "its supervisor"
        raise UserError(f"{run_dir} is a live run ({owner}): refusing to restore over it; stop it first "
                        f"(yolotui stop {run_dir.name}) or restore with --project elsewhere")


def restore(request: RestoreRequest) -> RestoreResult:
    """Fetch, check, place and register the run (see the module docstring)."""
    from yolotui.runs.store import check_writable, validate_name

    target, name = split_run(request.source)
    check_usable(target, in_child=False)
    validate_name(name)
    project = Path(os.path.abspath(os.path.expanduser(request.project or DEFAULT_PROJECT)))
    destination = project / name
    _refuse_live(destination)
    if destination.exists() and not destination.is_dir():
        raise UserError(f"{destination} is a file: restore with --project elsewhere")
    if destination.is_dir() and any(destination.iterdir()) and not request.force:
        raise UserError(f"{destination} already holds files: restore with --project elsewhere, or --force to "
                        "replace them with the mirror's")
    check_writable(project)
    index.check_home()
    project.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.restore-", dir=project))
    os.chmod(staging, 0o755)  # it becomes the run folder: as open as the ones yolotui train makes
    try:
        files = pull.fetch(target, name, staging)
        notes = pull.settle(staging)
        problems = pull.problems(staging)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise UserError(f"{target.join(name)}: refused: {problems[0]}{more}; the mirror's copy cannot be trusted "
                            "(a copy there was damaged): nothing was restored")
        fd = _place(staging, destination, request.force)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    warnings = []
    try:
        try:
            notes += _rewrite_paths(destination, request.source)
        except UserError as exc:  # a damaged run.yaml or opt.yaml: the run is restored, its paths are not moved
            warnings.append(f"{exc}; its recorded paths were not moved to {destination}")
        index.add(destination, name)
    finally:
        lock.release(fd)
    result = _result(destination, name, request.source, files, notes)
    result.warnings[:0] = warnings
    return result


def _place(staging: Path, destination: Path, force: bool) -> int:
    """Move the checked files into `destination`; the run's lock, held (the caller releases it)."""
    if not destination.exists():
        try:
            os.rename(staging, destination)
        except OSError as exc:
            raise UserError(f"cannot create {destination}: {exc.strerror or exc}; restore with --project "
                            "elsewhere") from None
        staging.mkdir()  # the caller removes it again
        return lock.claim(destination, "yolotui restore")
    fd = lock.claim(destination, "yolotui restore")  # RunBusy naming the owner when it came alive meanwhile
    try:
        for source in sorted(staging.rglob("*")):
            if source.is_dir():
                continue
            target = destination / source.relative_to(staging)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)
        pull.settle(destination)
    except BaseException:
        lock.release(fd)
        raise
    return fd


def _recorded_dir(run_dir: Path) -> str | None:
    """The folder the run lived in where it was mirrored from (status.json's run_dir, else opt.yaml's save_dir)."""
    from yolotui.runs.status import read_status

    status = read_status(run_dir)
    if status is not None and status.run_dir:
        return status.run_dir
    from yolotui import safe_yaml

    try:
        opt = safe_yaml.load_mapping(run_dir / OPT_YAML, "opt.yaml")
    except (UserError, OSError):
        return None
    return str(opt.get("save_dir")) if opt.get("save_dir") else None


def _moved(value: Any, old: str, new: str) -> Any:
    """`value` with the old run folder replaced by the new one (the folder itself, or a path inside it)."""
    if not isinstance(value, str) or not old:
        return value
    if value == old:
        return new
    if value.startswith(old.rstrip("/") + "/"):
        return new + value[len(old.rstrip("/")):]
    return value


def _rewrite_paths(run_dir: Path, source: str) -> list[str]:
    """Point the run's records at its new folder (see the module docstring); the notes saying what changed."""
    from yolotui.config import load_yaml, save_yaml
    from yolotui.runs.runconfig import read_run_config, run_yaml_path, write_run_config
    from yolotui.runs.status import read_status, write_status

    new, old = str(run_dir), _recorded_dir(run_dir) or ""
    notes = []
    status = read_status(run_dir)
    if status is not None:
        status.run_dir, status.launching = new, False
        write_status(run_dir, status)
    if (run_dir / OPT_YAML).is_file():
        opt = load_yaml(run_dir / OPT_YAML, "opt.yaml")
        opt["save_dir"] = new
        if "project" in opt:
            opt["project"] = str(run_dir.parent)
        save_yaml(run_dir / OPT_YAML, opt)
    if run_yaml_path(run_dir).is_file():
        config = read_run_config(run_dir)
        command = [_moved(str(word), old, new) for word in config["command"]]
        if config.get("backend") == ENGINE_BACKEND and command and not os.access(command[0], os.X_OK):
            notes.append(f"the trainer's Python {command[0]} is not on this machine: {sys.executable} runs it")
            command[0] = sys.executable
        config["command"] = command
        cwd = _moved(config.get("cwd"), old, new)
        config["cwd"] = cwd if isinstance(cwd, str) and os.path.isdir(cwd) else new
        if isinstance(config.get("options"), dict):
            config["options"] = {k: _moved(v, old, new) for k, v in config["options"].items()}
        config["restored"] = {"from": source, "at": time.time(), "host": socket.gethostname(),
                              "previous_dir": old or None}
        write_run_config(run_dir, config, trusted=False)  # the mirror's command: confirmed before it runs
    if old and old != new:
        notes.append(f"was {old}")
    return notes


def _result(run_dir: Path, name: str, source: str, files: list[str], notes: list[str]) -> RestoreResult:
    """The result, with warnings about what the run needs and this machine lacks (the data set, the model)."""
    from yolotui import safe_yaml
    from yolotui.runs.atomic import read_json
    from yolotui.runs.status import effective_state

    warnings = []
    try:
        opt = safe_yaml.load_mapping(run_dir / OPT_YAML, "opt.yaml")
    except (UserError, OSError):
        opt = {}
    for key in ("data", "cfg"):
        value = opt.get(key)
        if isinstance(value, str) and os.path.isabs(value) and not os.path.exists(value):
            warnings.append(f"{key} {value} is not on this machine: put it at the same path before resuming")
    manifest = read_json(manifest_path(run_dir / WEIGHTS_DIR / LAST_PT))
    manifest = manifest if isinstance(manifest, dict) else {}

    def number(key: str) -> int | None:
        value = manifest.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    if not (run_dir / WEIGHTS_DIR / LAST_PT).is_file():
        warnings.append("the mirror holds no weights/last.pt yet: the run will start from its beginning")
    return RestoreResult(name, run_dir, source, effective_state(run_dir), number("epoch"), number("epochs"),
                         number("step"), files, notes, warnings)
