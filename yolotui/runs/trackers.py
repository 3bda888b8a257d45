"""Experiment trackers in the run folder's contract: what run.yaml asks for, and what the trainer recorded.

Two run.yaml entries, both torch-free to read (the TUI, `status`, `yolotui tensorboard` use them):

- `trackers` (written by the launcher from --no-tensorboard, --mlflow [URI], --wandb PROJECT; carried over by
  every resume and extend, a flag given again replaces only its own key):
  `{tensorboard: true|false, batch_every: N, mlflow: {uri, experiment}, wandb: {project, entity, mode}}`.
  No entry at all means the defaults: TensorBoard on (event files in the run folder), nothing else.
- `tracker_runs` (written by the trainer, atomically, read-modify-write of run.yaml while it holds the run's
  lock): per tracker the identity it created (`mlflow.run_id` + `uri`, `wandb.id` + `project`), `epochs` (how
  many epochs it has been sent), and `failures` / `last_error` / `ok`. Every resume, extend and supervisor
  restart reads it back, so one yolotui run is one tracker run.

A tracker's trouble (not installed, server down, no credentials) never stops training: the trainer emits a
`warning` event of kind `tracker`, retries at the next epoch, and counts it here for `status`.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yolotui.errors import UserError

TRACKERS_KEY = "trackers"
RECORDS_KEY = "tracker_runs"
WARNING_KIND = "tracker"  # the `kind` of the warning events a failing tracker causes
DEFAULT_BATCH_EVERY = 20  # TensorBoard: losses and lr every N training batches (by global iteration)
DEFAULT_EXPERIMENT = "yolotui"
MLRUNS_DIR = "mlruns"  # the default MLflow file store: PROJECT/mlruns beside the run folders

# tracker name -> (import name, extra of yolotui that installs it)
PACKAGES = {"tensorboard": ("tensorboard", "tensorboard"), "mlflow": ("mlflow", "mlflow"),
            "wandb": ("wandb", "wandb")}
_BAD_WANDB_CHARS = set('/\\#?%:')
_write_lock = threading.Lock()


def install_hint(tracker: str) -> str:
    """The one line that says how to install a tracker's package (named by its yolotui extra)."""
    package, extra = PACKAGES[tracker]
    return f"{package} is not installed: pip install 'yolotui[{extra}]'"


def installed(tracker: str) -> bool:
    """True when the tracker's package can be imported here (checked without importing it)."""
    try:
        return importlib.util.find_spec(PACKAGES[tracker][0]) is not None
    except (ImportError, ValueError):
        return False


@dataclass
class TrackerSettings:
    """What run.yaml's `trackers` entry asks for (defaults: TensorBoard only).

    `tensorboard_asked` is False when TensorBoard is on only by default (run.yaml names no `tensorboard`): it is
    then used where its package is installed and left out, without a warning, where it is not (a plain
    `pip install .` has no tensorboard; the demo should not open on a failing tracker)."""

    tensorboard: bool = True
    batch_every: int = DEFAULT_BATCH_EVERY
    mlflow: dict[str, Any] | None = None  # {uri: str|None, experiment: str}
    wandb: dict[str, Any] | None = None  # {project: str, entity: str|None, mode: str|None}
    tensorboard_asked: bool = False

    def enabled(self) -> list[str]:
        """The trackers this run uses, in the order they are opened."""
        return [name for name, on in (("tensorboard", self.tensorboard and not self.tensorboard_skipped()),
                                      ("mlflow", self.mlflow is not None), ("wandb", self.wandb is not None)) if on]

    def tensorboard_skipped(self) -> bool:
        """TensorBoard on by default only, and its package not installed here."""
        return self.tensorboard and not self.tensorboard_asked and not installed("tensorboard")


def settings_from_entry(entry: Any) -> TrackerSettings:
    """TrackerSettings from a run.yaml `trackers` value; anything malformed falls back to its default."""
    if not isinstance(entry, dict):
        return TrackerSettings()
    every = entry.get("batch_every", DEFAULT_BATCH_EVERY)
    every = every if isinstance(every, int) and not isinstance(every, bool) and every > 0 else DEFAULT_BATCH_EVERY
    mlflow = entry.get("mlflow")
    if mlflow is True:
        mlflow = {}
    wandb = entry.get("wandb")
    if isinstance(wandb, str):
        wandb = {"project": wandb}
    if isinstance(wandb, dict) and not (isinstance(wandb.get("project"), str) and wandb["project"]):
        wandb = None
    return TrackerSettings(tensorboard=entry.get("tensorboard", True) is not False, batch_every=every,
                           mlflow=dict(mlflow) if isinstance(mlflow, dict) else None,
                           wandb=dict(wandb) if isinstance(wandb, dict) else None,
                           tensorboard_asked=entry.get("tensorboard") is True)


def read_settings(run_dir: Path) -> TrackerSettings:
    """The run's tracker settings (the defaults without run.yaml or without a `trackers` entry)."""
    from yolotui.runs.runconfig import run_yaml_field

    return settings_from_entry(run_yaml_field(Path(run_dir), TRACKERS_KEY))


@dataclass
class TrackerFlags:
    """The tracker flags given on a command line (None: not given, keep the run's or the default)."""

    tensorboard: bool | None = None
    mlflow: str | bool | None = None  # True: --mlflow with no URI; a str: the URI
    wandb: str | None = None  # the W&B project

    def given(self) -> bool:
        """True when any tracker flag was given."""
        return self.tensorboard is not None or self.mlflow is not None or self.wandb is not None

    def entry(self) -> dict[str, Any]:
        """The run.yaml `trackers` keys for the flags given, checked: UserError naming the flag or the extra."""
        out: dict[str, Any] = {}
        if self.tensorboard is not None:
            out["tensorboard"] = bool(self.tensorboard)
        if self.mlflow is not None:
            if not installed("mlflow"):
                raise UserError(f"--mlflow: {install_hint('mlflow')}")
            uri = self.mlflow if isinstance(self.mlflow, str) and self.mlflow.strip() else None
            uri = uri or os.environ.get("MLFLOW_TRACKING_URI") or None
            out["mlflow"] = {"uri": _absolute_file_uri(uri.strip()) if uri else None,
                             "experiment": os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT}
        if self.wandb is not None:
            project = self.wandb.strip()
            if not project or len(project) > 128 or _BAD_WANDB_CHARS & set(project):
                raise UserError(f"--wandb {self.wandb!r}: give a W&B project name (up to 128 characters, none of "
                                "/ \\ # ? % :)")
            if not installed("wandb"):
                raise UserError(f"--wandb: {install_hint('wandb')}")
            out["wandb"] = {"project": project, "entity": os.environ.get("WANDB_ENTITY") or None,
                            "mode": os.environ.get("WANDB_MODE") or None}
        return out


def _absolute_file_uri(uri: str) -> str:
    """A relative `file:` store (or a bare path) made absolute now, so every attempt writes to the same one;
    a server or database URI (http:, sqlite:, databricks ...) is kept as given."""
    import re

    scheme = re.match(r"^([a-zA-Z][a-zA-Z0-9+.-]*):", uri)
    if uri == "databricks" or (scheme and scheme.group(1).lower() != "file"):
        return uri
    path = uri[len("file:"):] if scheme else uri
    if path.startswith("//"):
        path = path[2:]
    return "file:" + str(Path(path).expanduser().resolve())


def merge_entries(previous: Any, given: dict[str, Any]) -> dict[str, Any]:
    """A resume's `trackers` entry: the run's previous one with the keys given again replaced."""
    base = dict(previous) if isinstance(previous, dict) else {}
    return {**base, **given}


def carried_entries(run_dir: Path, previous: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """The tracker entries a relaunch of `run_dir` writes into its new run.yaml: `trackers` (the previous one,
    the keys given again replaced) and `tracker_runs` (the identities), the latter only while the run's
    events.jsonl is there: a folder reused by a new run (--exist-ok sets the old events aside) gets new ones."""
    from yolotui.runs.layout import EVENTS_JSONL

    out: dict[str, Any] = {}
    if TRACKERS_KEY in given or isinstance(previous.get(TRACKERS_KEY), dict):
        out[TRACKERS_KEY] = merge_entries(previous.get(TRACKERS_KEY), given.get(TRACKERS_KEY) or {})
    if isinstance(previous.get(RECORDS_KEY), dict) and (Path(run_dir) / EVENTS_JSONL).exists():
        out[RECORDS_KEY] = previous[RECORDS_KEY]
    return out


def default_mlflow_uri(run_dir: Path) -> str:
    """The local MLflow file store a run without a URI uses: PROJECT/mlruns beside the run folder."""
    return "file:" + str(Path(run_dir).resolve().parent / MLRUNS_DIR)


# ------------------------------------------------------------------------------- records (tracker_runs)

def _read_run_yaml(run_dir: Path) -> dict[str, Any] | None:
    """The whole run.yaml mapping (bounded, lenient), or None when it is missing or unreadable."""
    import yaml

    from yolotui import safe_yaml
    from yolotui.runs.runconfig import MAX_RUN_YAML_BYTES, run_yaml_path

    path = run_yaml_path(Path(run_dir))
    try:
        if path.stat().st_size > MAX_RUN_YAML_BYTES:
            return None
        data = safe_yaml.load_file(path)
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError):
        return None
    return data if isinstance(data, dict) else None


def read_records(run_dir: Path) -> dict[str, dict[str, Any]]:
    """run.yaml's `tracker_runs`: tracker name -> its record ({} when none or malformed)."""
    data = _read_run_yaml(run_dir) or {}
    records = data.get(RECORDS_KEY)
    if not isinstance(records, dict):
        return {}
    return {str(k): dict(v) for k, v in records.items() if isinstance(v, dict)}


def update_record(run_dir: Path, tracker: str, **fields: Any) -> bool:
    """Merge `fields` into run.yaml's tracker_runs[tracker], atomically; False when there is no run.yaml to
    hold it (a trainer started by hand): the record then lives only as long as the process."""
    from yolotui.runs.runconfig import write_run_config

    with _write_lock:
        data = _read_run_yaml(run_dir)
        if data is None:
            return False
        records = data.get(RECORDS_KEY) if isinstance(data.get(RECORDS_KEY), dict) else {}
        record = dict(records.get(tracker) or {}) if isinstance(records.get(tracker), dict) else {}
        record.update(fields)
        from yolotui.runs.runconfig import is_trusted

        trusted = is_trusted(data)  # a record added by the trainer vouches for nothing else in the file
        data[RECORDS_KEY] = {**records, tracker: record}
        write_run_config(Path(run_dir), data, trusted=trusted)
        return True


def summary_lines(run_dir: Path) -> list[str]:
    """`status` lines for the run's trackers: where each writes, its identity, and its failures if any."""
    settings = read_settings(run_dir)
    records = read_records(run_dir)
    lines = []
    for name in ("tensorboard", "mlflow", "wandb"):
        record = records.get(name) or {}
        wanted = name in settings.enabled()
        if not wanted and not record:
            continue
        if name == "tensorboard":
            where = str(record.get("dir") or run_dir)
        elif name == "mlflow":
            where = f"run {record.get('run_id') or '-'} at {record.get('uri') or (settings.mlflow or {}).get('uri') or default_mlflow_uri(run_dir)}"
        else:
            project = record.get("project") or (settings.wandb or {}).get("project") or "-"
            where = f"run {record.get('id') or '-'} in project {project}"
        if not wanted:
            where += " (turned off since)"
        failures = record.get("failures") if isinstance(record.get("failures"), int) else 0
        health = ""
        if failures:
            state = "recovered" if record.get("ok") else "failing"
            health = f"; {failures} failure{'s' if failures != 1 else ''}, {state} (last: {record.get('last_error')})"
        epochs = record.get("epochs")
        sent = f", {epochs} epochs sent" if isinstance(epochs, int) and name != "tensorboard" else ""
        lines.append(f"{name}: {where}{sent}{health}")
    return labelled(lines)


def labelled(lines: list[str], label: str = "trackers") -> list[str]:
    """`status` layout: the label on the first line, the others indented under it."""
    return [f"{label if i == 0 else '':<11}{line}" for i, line in enumerate(lines)]


def tensorboard_dir(run_dir: Path) -> Path:
    """Where the run's own TensorBoard event files are (the run folder for yolotui's engine)."""
    record = read_records(run_dir).get("tensorboard") or {}
    return Path(record["dir"]) if isinstance(record.get("dir"), str) and record["dir"] else Path(run_dir)
