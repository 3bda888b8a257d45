"""One line of facts per run (state, epoch x/y, best mAP, checkpoint age ...) for `yolotui ls` and the TUI.

Cheap enough for hundreds of runs: reads status.json as plain JSON, two columns of results.csv and only the
tail of events.jsonl. `yolotui ls` imports this module, so it avoids `dataclasses` (which pulls in
`inspect`, ~20 ms) and everything else that is slow to import.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from yolotui.runs import index
from yolotui.runs.atomic import read_json
from yolotui.runs.events import BATCHES_FILE, BATCHES_PREVIOUS
from yolotui.runs.layout import (
    BEST_PT,
    EVENTS_JSONL,
    FAILED,
    FINISHED,
    INTERRUPTED,
    LAST_PT,
    LIVE_STATES,
    RESULTS_CSV,
    STATUS_JSON,
    STOPPED,
    WEIGHTS_DIR,
)
from yolotui.runs.status import slurm_job_of, state_of
from yolotui.runs.status_schema import status_problem, unreadable_line

TAIL_BYTES = 64 * 1024


class RunSummary:
    """What the runs table shows for one run; None where the run has not said yet.

    Fields: name, path, state (derived: interrupted when the supervisor is gone), attempt, epoch (epochs
    finished), epochs (planned), best_map (best mAP50-95 so far), checkpoint_age (seconds since last.pt was
    written), device, started, updated, failure_class, message, slurm (a SLURM run: job_id, state, reason,
    nodes, time_left; None for a local run), batch/batches (how far the epoch in progress is, from the newest
    batch event), last_event_ts/last_event_type (the newest event that says how far the trainer is).
    """

    __slots__ = ("name", "path", "state", "attempt", "epoch", "epochs", "best_map", "checkpoint_age", "device",
                 "started", "updated", "failure_class", "message", "slurm", "batch", "batches", "last_event_ts",
                 "last_event_type")

    def __init__(self, name: str, path: str, state: str, attempt: int = 0, epoch: int | None = None,
                 epochs: int | None = None, best_map: float | None = None, checkpoint_age: float | None = None,
                 device: str | None = None, started: float | None = None, updated: float | None = None,
                 failure_class: str | None = None, message: str | None = None, slurm: dict | None = None,
                 batch: int | None = None, batches: int | None = None, last_event_ts: float | None = None,
                 last_event_type: str | None = None) -> None:
        self.name = name
        self.path = path
        self.state = state
        self.attempt = attempt
        self.epoch = epoch
        self.epochs = epochs
        self.best_map = best_map
        self.checkpoint_age = checkpoint_age
        self.device = device
        self.started = started
        self.updated = updated
        self.failure_class = failure_class
        self.message = message
        self.slurm = slurm
        self.batch = batch  # batches done of the epoch in progress (the newest batch event), with batches
        self.batches = batches
        self.last_event_ts = last_event_ts  # when the trainer last said how far it is (batch, epoch, start)
        self.last_event_type = last_event_type

    def to_dict(self) -> dict:
        """The JSON-ready form."""
        return {field: getattr(self, field) for field in self.__slots__}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunSummary) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        fields = ", ".join(f"{key}={value!r}" for key, value in self.to_dict().items())
        return f"RunSummary({fields})"


MAP_KEY = "metrics/mAP_0.5:0.95"


def results_facts(path: Path) -> tuple[int | None, float | None]:
    """(epochs finished, best mAP50-95) from results.csv, parsing only the two columns needed.

    A torn last row is skipped, as in `results.read_rows`; cheap enough for hundreds of runs.
    """
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None, None
    lines = text.split("\n")
    from yolotui.runs.results import official_names

    names, offset = official_names([name.strip() for name in lines[0].split(",")])  # ultralytics' header too
    try:
        epoch_col, map_col = names.index("epoch"), names.index(MAP_KEY)
    except ValueError:
        return None, None
    last_epoch: float | None = None
    best: float | None = None
    for line in lines[1:-1]:  # the last piece is "" after a final newline, or a torn row
        cells = line.split(",")
        if len(cells) != len(names):
            continue
        try:
            epoch, value = float(cells[epoch_col]), float(cells[map_col])
        except ValueError:
            continue
        last_epoch = epoch
        best = value if best is None or value > best else best
    return (int(last_epoch) + 1 + offset if last_epoch is not None else None), best


def last_epochs(path: Path) -> tuple[int | None, bool]:
    """(planned epochs from the newest event that says, whether a `done` event came after it)."""
    event, done = newest_run_progress(os.path.dirname(os.fspath(path)) or ".")
    return (_int(event.get("epochs")) if event else None), done


def _int(value) -> int | None:
    try:
        return None if value is None or isinstance(value, bool) else int(value)
    except (TypeError, ValueError):
        return None


def newest_progress(path: Path) -> tuple[dict | None, bool]:
    """(the newest event that names the planned epochs: a batch, epoch or start event; whether a `done` event
    came after it).

    Reads the file backwards in growing blocks up to TAIL_BYTES and parses only lines that mention epochs.
    """
    done = False
    block = 8 * 1024
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            while True:
                start = max(0, size - block)
                handle.seek(start)
                data = handle.read(size - start)
                lines = data.split(b"\n")
                if start > 0:
                    lines = lines[1:]  # may begin mid-line
                if not data.endswith(b"\n"):
                    lines = lines[:-1]  # a torn last line
                for raw in reversed(lines):
                    if b'"epochs"' not in raw and b'"done"' not in raw:
                        continue
                    try:
                        event = json.loads(raw)
                    except (ValueError, RecursionError):
                        continue
                    if not isinstance(event, dict):
                        continue
                    if event.get("type") == "done":
                        done = True
                    if "epochs" in event and _int(event["epochs"]) is not None:
                        return event, done
                if start == 0 or block >= TAIL_BYTES:
                    return None, done
                block *= 4
    except OSError:
        return None, False


def newest_run_progress(folder: str) -> tuple[dict | None, bool]:
    """newest_progress over both streams: the newer of the batch stream's newest event and events.jsonl's
    (an old folder has only the latter); `done` from events.jsonl."""
    event, done = newest_progress(os.path.join(folder, EVENTS_JSONL))
    batch = newest_progress(os.path.join(folder, BATCHES_FILE))[0] or \
        newest_progress(os.path.join(folder, BATCHES_PREVIOUS))[0]
    if batch is None or (event is not None and (_ts(event), _reach(event)) > (_ts(batch), _reach(batch))):
        return event, done
    return batch, done  # the newer (written in the same millisecond: the one further on)


def _reach(event: dict) -> int:
    """How far an event says the run is, for two written in the same millisecond: epochs done (a batch event
    of 0-based epoch k: k; an epoch event of k: k + 1), -1 for any other."""
    at = _int(event.get("epoch"))
    if at is None:
        return -1
    return at + 1 if event.get("type") == "epoch" else at


def _ts(event: dict) -> float:
    ts = event.get("ts")
    return float(ts) if isinstance(ts, (int, float)) and not isinstance(ts, bool) else 0.0


def derived_state(run_dir: str | Path, recorded: str | None, slurm_job: str | None = None, *,
                  updated: float | None = None, supervisor_pid: int | None = None, launching: bool = False) -> str:
    """The state to show (the one rule, yolotui.runs.status.state_of; a SLURM run's from its job)."""
    return state_of(Path(run_dir), recorded, slurm_job, updated=updated, supervisor_pid=supervisor_pid,
                    launching=launching)


def _checkpoint_mtime(folder: str) -> float | None:
    for ckpt in (LAST_PT, BEST_PT):
        try:
            return os.stat(os.path.join(folder, WEIGHTS_DIR, ckpt)).st_mtime
        except OSError:
            continue
    return None


def _summarize(folder: str, name: str | None) -> tuple[RunSummary, str | None, float | None]:
    """(summary, state as recorded in status.json, checkpoint mtime)."""
    status_file = os.path.join(folder, STATUS_JSON)
    for _look in range(2):
        status = read_json(status_file)
        problem = None
        if status is None and os.path.exists(status_file):
            problem = unreadable_line(STATUS_JSON, "not valid JSON")
        elif status is not None:
            problem = status_problem(status)
            problem = unreadable_line(STATUS_JSON, problem) if problem else None
        if problem is not None:
            status = None  # one bad field must not take down the table
        recorded = str(status.get("state")) if status is not None and status.get("state") else None
        job = slurm_job_of(status)
        state = derived_state(folder, recorded, job, updated=(status or {}).get("updated"),
                              supervisor_pid=(status or {}).get("supervisor_pid"),
                              launching=bool((status or {}).get("launching")))
        # A free lock beside a live state read before it: the supervisor may have written its end and exited
        # in between (it always writes first), so one more read settles it.
        if not (state == INTERRUPTED and recorded in LIVE_STATES):
            break
    summary = RunSummary(name=name or (status or {}).get("name") or os.path.basename(folder), path=folder,
                         state=state)
    if job:
        from yolotui.runs import slurm_state as slurm

        summary.slurm = slurm.describe(job)
    if status is not None:
        summary.attempt = status.get("attempt") or 0
        summary.device = status.get("device")
        summary.started = status.get("started")
        summary.updated = status.get("updated")
        summary.failure_class = status.get("failure_class")
        summary.message = status.get("message")
    if problem is not None:
        summary.message = problem
    summary.epoch, summary.best_map = results_facts(os.path.join(folder, RESULTS_CSV))
    event, done = newest_run_progress(folder)
    _apply_progress(summary, event, done)
    mtime = _checkpoint_mtime(folder)
    if mtime is not None:
        summary.checkpoint_age = time.time() - mtime
    return summary, recorded, mtime


def _apply_progress(summary: RunSummary, event: dict | None, done: bool) -> None:
    """Planned epochs, epochs done and the batch of the epoch in progress from the newest progress event.

    results.csv (one row per finished epoch) is written at an epoch's very end, and a trainer that writes none
    (an exec run) may still send events: the newest event counts too, whichever is further (a batch event of
    0-based epoch k: k epochs done; an epoch event of k: k + 1)."""
    summary.epochs = _int(event.get("epochs")) if event else None
    if event is not None:
        kind, at = event.get("type"), _int(event.get("epoch"))
        summary.last_event_type = str(kind) if kind else None
        ts = event.get("ts")
        summary.last_event_ts = float(ts) if isinstance(ts, (int, float)) and not isinstance(ts, bool) else None
        from_events = None
        if kind == "batch" and at is not None:
            from_events = at
            summary.batch, summary.batches = _int(event.get("batch")), _int(event.get("batches"))
        elif kind == "epoch" and at is not None:
            from_events = at + 1
        if from_events is not None and (summary.epoch is None or from_events > summary.epoch):
            summary.epoch = from_events
    if done:
        summary.batch = summary.batches = None
        if summary.epoch is None:
            summary.epoch = summary.epochs


def summarize(run_dir: Path, name: str | None = None) -> RunSummary:
    """Summarise one run directory from its files."""
    return _summarize(os.fspath(run_dir), name)[0]


# --- a cache of ended runs' summaries, so listing hundreds of old runs costs a few stat() calls each ------
CACHE_FILE = "summary-cache.json"
_CACHE_VERSION = 1
_FINAL_STATES = frozenset({FINISHED, FAILED, STOPPED})  # as recorded; nothing will change them but a new launch
def _fingerprint(folder: str) -> list | None:
    """(mtime_ns, size) of status.json and the checkpoint's mtime; None if there is no status.json.

    Enough for a run whose recorded state is final: nothing appends to results.csv or events.jsonl after
    the supervisor's last write, and a resume rewrites status.json (state queued) before anything else.
    """
    try:
        st = os.stat(os.path.join(folder, STATUS_JSON))
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size, _checkpoint_mtime(folder)]


def _load_cache(path: str) -> dict:
    data = read_json(path)
    if not isinstance(data, dict) or data.get("version") != _CACHE_VERSION:
        return {}
    runs = data.get("runs")
    return runs if isinstance(runs, dict) else {}


def _save_cache(path: str, runs: dict) -> None:
    """Replace the cache file (no fsync: losing it only costs one slower listing)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump({"version": _CACHE_VERSION, "runs": runs}, handle, separators=(",", ":"))
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def summarize_all(use_cache: bool = True) -> list[RunSummary]:
    """Summaries of every indexed run, newest first.

    Runs whose recorded state is final (finished, failed, stopped) are cached under the yolotui home,
    keyed by the size and mtime of their files, so only live or changed runs are read again.
    """
    cache_path = os.path.join(os.fspath(index.home_dir()), CACHE_FILE)
    cache = _load_cache(cache_path) if use_cache else {}
    kept: dict = {}
    summaries = []
    now = time.time()
    for entry in index.entries(check_exists=False):
        marks = _fingerprint(entry.path)
        if marks is None and not os.path.isdir(entry.path):
            continue  # the folder is gone: dropped, as index.entries() does
        hit = cache.get(entry.path)
        if marks is not None and hit is not None and hit.get("marks") == marks:
            try:
                summary = RunSummary(**hit["summary"])
            except (TypeError, KeyError):
                hit = None
            else:
                summary.name = entry.name
                summary.checkpoint_age = now - marks[-1] if marks[-1] is not None else None
                summaries.append(summary)
                kept[entry.path] = hit
                continue
        summary, recorded, _ = _summarize(entry.path, entry.name)
        summaries.append(summary)
        if marks is not None and recorded in _FINAL_STATES:
            kept[entry.path] = {"marks": marks, "summary": summary.to_dict()}
    if use_cache and kept != cache:
        _save_cache(cache_path, kept)
    return summaries
