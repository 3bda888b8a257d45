"""Remedies: what the supervisor changes before retrying a failed attempt, by failure class
(docs/architecture.md, "Failure classes").

| class  | remedy                                                                                        |
| ------ | --------------------------------------------------------------------------------------------- |
| oom    | resume with half the batch and twice the accumulation (same images per optimizer step), with   |
|        | PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; below `restart.min_batch` stop and say what  |
|        | to try instead                                                                                 |
| comm   | resume after exponential backoff with NCCL async error handling, blocking wait and a collective |
|        | timeout set (the variable names the installed torch reads)                                      |
| nan    | resume from weights/last.pt, the last checkpoint written with finite losses (the trainer never |
|        | replaces it with a diverged state), with the learning rate halved (--lr-scale)                 |
| data   | stop, no retry: the message names the file and line                                            |
| hang   | resume from weights/last.pt with backoff (the stall watchdog ended the attempt)                |
| host-oom | resume with half the data-loader workers and without the RAM cache                           |
| crash  | resume with backoff, up to the attempt limit                                                   |

`killed` (a signal yolotui did not send) is decided in policy.decide: never retried, offered for resume.
`disk` (out of space or quota) is decided there too: never retried; the message names the folder and its free
space.
Every remedy is bounded by the attempt limit (`restart.max_attempts` in run.yaml). `plan_remedy` is a pure
function of what the supervisor saw (plus the run's last.pt manifest, read for the message), torch-free.

run.yaml `restart` settings read here: max_attempts, backoff_s, backoff_max_s, min_batch (default 1),
collective_timeout_s (default 600), comm_retries (default 10), comm_window_s (default 3600).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from yolotui import formatting
from yolotui.backends.base import REMEDY_ACCUMULATE, REMEDY_LR_SCALE, REMEDY_OPT_YAML, REMEDY_WORKERS
from yolotui.runs.atomic import read_json
from yolotui.runs.events import EventWriter
from yolotui.runs.layout import EVENTS_JSONL, FAILED, LAST_PT, OPT_YAML, manifest_path, weights_dir
from yolotui.runs.runconfig import restart_settings
from yolotui.supervisor import decision

NOMINAL_BATCH = 64  # the official trainer's nominal batch: accumulation = round(64 / batch) by default
DEFAULT_MIN_BATCH = 1
DEFAULT_COLLECTIVE_TIMEOUT_S = 600
DEFAULT_COMM_RETRIES = 10
DEFAULT_COMM_WINDOW_S = 3600.0
COMM_DEBUG_ENV = {"NCCL_DEBUG": "INFO", "TORCH_DISTRIBUTED_DEBUG": "DETAIL"}
DEFAULT_WORKERS = 8  # the official default --workers
EXPANDABLE = "expandable_segments:True"
BATCH_FLAGS = ("--batch-size", "--batch")


def backend_remedies(run_config: dict[str, Any]) -> tuple[frozenset[str], str]:
    """(the remedy names the run's backend takes, how it names its trainer); none for an unknown backend."""
    from yolotui.backends import get_backend
    from yolotui.errors import UserError

    try:
        backend = get_backend(run_config.get("backend"))
    except UserError:
        return frozenset(), "this command"
    return backend.remedies(), backend.title or "this command"


# ------------------------------------------------------------------------------------ facts of the attempt

def start_event(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The attempt's `start` event (the settings it really ran with), or {}."""
    for event in events:
        if event.get("type") == "start":
            return event
    return {}


def flag_value(argv: list[str], flags: tuple[str, ...]) -> tuple[str | None, str | None]:
    """(flag, value) of the last of `flags` present in `argv` (`--f v` or `--f=v`), else (None, None)."""
    found: tuple[str | None, str | None] = (None, None)
    for i, token in enumerate(argv):
        for flag in flags:
            if token == flag and i + 1 < len(argv):
                found = (flag, argv[i + 1])
            elif token.startswith(flag + "="):
                found = (flag, token.split("=", 1)[1])
    return found


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def current_batch(record: dict[str, Any], run_config: dict[str, Any], events: list[dict[str, Any]]) \
        -> tuple[str, int | None, int | None]:
    """(batch flag to set, batch size, accumulation) of the failed attempt: its start event, else its command."""
    command = [str(a) for a in record.get("command") or run_config.get("command") or []]
    flags = (str(run_config["batch_flag"]),) if run_config.get("batch_flag") else BATCH_FLAGS  # a backend's own
    flag, value = flag_value(command, flags)
    start = start_event(events)
    batch = _int((start.get("config") or {}).get("batch_size")) or _int(value) \
        or _int((run_config.get("options") or {}).get("batch_size"))
    accumulate = _int(start.get("accumulate")) or _int(flag_value(command, ("--accumulate",))[1])
    if accumulate is None and batch:
        accumulate = max(round(NOMINAL_BATCH / batch), 1)
    return flag or flags[0], batch, accumulate


def last_checkpoint(run_dir: Path | None) -> dict[str, Any] | None:
    """The manifest of RUN/weights/last.pt (epoch, step, ...) or None."""
    if run_dir is None:
        return None
    manifest = read_json(manifest_path(weights_dir(Path(run_dir)) / LAST_PT))
    return manifest if isinstance(manifest, dict) else None


# ------------------------------------------------------------------------------------- torch's variables

def torch_version() -> tuple[int, int]:
    """(major, minor) of the installed torch, read from its package metadata (torch is not imported)."""
    try:
        parts = metadata.version("torch").split("+")[0].split(".")
        return int(parts[0]), int(parts[1])
    except (metadata.PackageNotFoundError, ValueError, IndexError):
        return (0, 0)


def nccl_env_names(version: tuple[int, int] | None = None) -> tuple[str, str]:
    """(async error handling, blocking wait) variable names: TORCH_NCCL_* since torch 2.2, NCCL_* before."""
    version = torch_version() if version is None else version
    prefix = "TORCH_NCCL_" if version >= (2, 2) or version == (0, 0) else "NCCL_"
    return prefix + "ASYNC_ERROR_HANDLING", prefix + "BLOCKING_WAIT"


def alloc_conf_names(version: tuple[int, int] | None = None) -> list[str]:
    """PYTORCH_CUDA_ALLOC_CONF, plus PYTORCH_ALLOC_CONF where the installed torch reads that name (2.9+)."""
    version = torch_version() if version is None else version
    return ["PYTORCH_CUDA_ALLOC_CONF"] + (["PYTORCH_ALLOC_CONF"] if version >= (2, 9) else [])


def with_expandable(value: str | None) -> str:
    """An allocator config string with expandable_segments:True (other options kept)."""
    options = [o for o in (value or "").split(",") if o.strip() and not o.strip().startswith("expandable_segments")]
    return ",".join([EXPANDABLE, *options])


# --------------------------------------------------------------------------------------------- planning

def _retry_text(attempt: int, max_attempts: int, delay: float) -> str:
    return f"retry {attempt + 1}/{max_attempts} after {delay:g} s"


@dataclass
class _Facts:
    """What every class's planner reads: the failed attempt, the run's settings and its backend's remedies."""

    failure_class: str
    message: str
    record: dict[str, Any]
    run_config: dict[str, Any]
    events: list[dict[str, Any]]
    run_dir: Path | None
    so_far: dict[str, Any]
    restart: dict[str, Any]
    takes: frozenset[str]
    trainer: str
    backoff: float
    delay: float  # the doubling backoff of this attempt

    @property
    def engine(self) -> bool:
        """The trainer takes --accumulate (yolotui's engine)."""
        return REMEDY_ACCUMULATE in self.takes

    def stop(self, remedy: str) -> decision.Decision:
        """Not retried, saying why."""
        return decision.Decision(retry=False, state=FAILED, failure_class=self.failure_class, message=self.message,
                                 remedy=remedy)


# A planner returns the final Decision, or (changes, settings, words, delay) of a retry the attempt limit bounds.
Planned = decision.Decision | tuple[dict[str, Any], dict[str, Any], str, float]


def plan_remedy(failure_class: str, message: str, record: dict[str, Any], run_config: dict[str, Any],
                events: list[dict[str, Any]], run_dir: Path | None = None,
                changes_so_far: dict[str, Any] | None = None) -> decision.Decision:
    """The decision for a failed attempt of class oom, comm, nan, data or crash (see the module table)."""
    attempt = int(record.get("attempt") or 1)
    max_attempts, backoff, backoff_max = restart_settings(run_config)
    takes, trainer = backend_remedies(run_config)
    if failure_class == decision.DATA:
        return decision.Decision(retry=False, state=FAILED, failure_class=decision.DATA, message=message,
                                 remedy="not retried: fix the data set or configuration named above, then resume")
    if failure_class not in _PLANNERS:
        failure_class = decision.CRASH if failure_class not in (decision.CRASH, "io") else failure_class
    facts = _Facts(failure_class, message, record, run_config, events, run_dir, changes_so_far or {},
                   run_config.get("restart") or {}, takes, trainer, backoff,
                   decision.backoff_delay(attempt, backoff, backoff_max))
    planned = _PLANNERS.get(failure_class, _plan_crash)(facts)
    if isinstance(planned, decision.Decision):
        return planned
    changes, settings, what, delay = planned

    attempt -= int(record.get("uncounted_attempts") or 0)  # free comm retries do not use up the limit
    if attempt >= max_attempts:
        return facts.stop(f"not retried: attempt limit reached ({max_attempts}); the remedy would have been: {what}")
    return decision.Decision(retry=True, delay_s=delay, changes=changes, settings=settings,
                             failure_class=failure_class, message=message, state=FAILED,
                             remedy=f"{what}; {_retry_text(attempt, max_attempts, delay)}")


def _plan_oom(f: _Facts) -> Planned:
    """Half the batch, twice the accumulation, the expandable allocator; stop below the minimum batch."""
    flag, batch, accumulate = current_batch(f.record, f.run_config, f.events)
    world = max(1, _int(start_event(f.events).get("world_size")) or 1)  # DDP: the batch is split over ranks
    min_batch = max(world, int(f.restart.get("min_batch", DEFAULT_MIN_BATCH)))
    new_batch = (batch // 2) // world * world if batch else 0
    if batch is None or new_batch < min_batch:
        at = f"batch {batch}" if batch else "this batch size"
        return f.stop(f"not retried: out of memory at {at}, and half of it is below the minimum batch "
                      f"{min_batch}; try a smaller --img, a smaller model (e.g. --cfg yolov9-t or gelan-s), "
                      "fewer --workers or no --cache, and PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
                      "(yolotui set it on its retries)")
    new_accumulate = max(1, round((accumulate or 1) * batch / new_batch))  # twice, when the batch halves
    changes: dict[str, Any] = {"args": {flag: new_batch}}
    settings: dict[str, Any] = {"batch_size": [batch, new_batch]}
    if f.engine:
        changes["args"]["--accumulate"] = new_accumulate
        settings["accumulate"] = [accumulate, new_accumulate]
    writes_opt_yaml = REMEDY_OPT_YAML in f.takes
    if writes_opt_yaml:  # e.g. the official --resume reads opt.yaml, not the command line: halve it there too
        changes["opt_yaml"] = {"batch_size": new_batch}
    env_now = {**(f.run_config.get("env") or {}), **(f.so_far.get("env") or {})}
    changes["env"] = {}
    for name in alloc_conf_names():
        value = with_expandable(env_now.get(name))
        changes["env"][name] = value
        settings[name] = [env_now.get(name), value]
    what = (f"resume with batch {new_batch} (was {batch})"
            + (f" and accumulation {new_accumulate} (was {accumulate}), the same images per optimizer step"
               if f.engine else "")
            + (f" (written to opt.yaml, which {f.trainer}'s --resume reads; the original is kept as "
               "opt.yaml.orig)" if writes_opt_yaml else "")
            + f", {EXPANDABLE} in {' and '.join(alloc_conf_names())}")
    return changes, settings, what, f.backoff  # the settings change, not the machine: no longer waits


def _plan_comm(f: _Facts) -> Planned:
    """NCCL's error handling, blocking wait, a collective timeout and debug output; a budget of free retries."""
    async_name, blocking_name = nccl_env_names()
    timeout_s = int(f.restart.get("collective_timeout_s", DEFAULT_COLLECTIVE_TIMEOUT_S))
    # YOLOTUI_DDP_TIMEOUT_MIN: the engine's process-group timeout (yolotui/engine/train/ddp.py)
    changes = {"env": {async_name: "1", blocking_name: "1", "YOLOTUI_DDP_TIMEOUT_MIN": f"{timeout_s / 60:g}",
                       **COMM_DEBUG_ENV}}
    settings = {name: [(f.so_far.get("env") or {}).get(name), value] for name, value in changes["env"].items()}
    what = (f"resume after {f.delay:g} s backoff with {async_name}=1, {blocking_name}=1, a {timeout_s} s "
            "collective timeout, NCCL_DEBUG=INFO and TORCH_DISTRIBUTED_DEBUG=DETAIL")
    budget = comm_budget(f.record, f.restart)
    if budget is not None:
        return decision.Decision(retry=True, delay_s=f.delay, changes=changes, settings=settings,
                                 failure_class=f.failure_class, message=f.message, state=FAILED, counted=False,
                                 remedy=f"{what}; {budget}")
    return changes, settings, what, f.delay


def _plan_hang(f: _Facts) -> Planned:
    """Resume from last.pt after the stall watchdog ended the attempt."""
    checkpoint = last_checkpoint(f.run_dir)
    what = (f"resume from weights/last.pt (epoch {checkpoint.get('epoch')}, batch {checkpoint.get('step')})"
            if checkpoint else "restart (no checkpoint was written yet)")
    return {}, {}, what, f.delay


def _plan_host_oom(f: _Facts) -> Planned:
    """Half the data-loader workers and no RAM cache; stop when there is nothing left to reduce."""
    changes, settings, what = host_oom_changes(f.record, f.run_config, f.events, f.engine)
    if not changes and REMEDY_WORKERS not in f.takes:
        what = "resume (the command has no --workers or --cache ram to reduce)"
    elif not changes:
        return f.stop("not retried: the data loader already runs without workers and without --cache ram; "
                      "free host memory (other processes), use a smaller --batch or --img, or add swap")
    return changes, settings, what, f.backoff


def _plan_nan(f: _Facts) -> Planned:
    """Resume from the last checkpoint with finite losses, the learning rate halved where the trainer takes it."""
    changes: dict[str, Any] = {}
    settings: dict[str, Any] = {}
    flag_scale = flag_value([str(a) for a in f.record.get("command") or []], ("--lr-scale",))[1]
    scale = float(start_event(f.events).get("lr_scale") or flag_scale or 1.0)
    checkpoint = last_checkpoint(f.run_dir)
    source = (f"weights/last.pt ({formatting.epochs_done(checkpoint.get('epoch'), checkpoint.get('epochs'), checkpoint.get('step'))}), the last "
              "checkpoint with finite losses" if checkpoint else "the start (no checkpoint was written yet)")
    if not checkpoint and f.run_config.get("resume_if_usable"):  # a backend without manifests (official, ultralytics)
        source = f"{f.run_config['resume_if_usable']} when it is resumable (else the start)"
    if REMEDY_LR_SCALE in f.takes:
        changes["args"] = {"--lr-scale": scale / 2}
        settings["lr_scale"] = [scale, scale / 2]
        what = f"resume from {source} with the learning rate halved (lr scale {scale:g} -> {scale / 2:g})"
    elif REMEDY_WORKERS in f.takes:  # a trainer that resumes from its checkpoint, without an lr scale
        what = (f"resume from {source}; {f.trainer} has no learning-rate scale, so it resumes at the "
                "same lr (if it diverges again, fine-tune from best.pt with a lower lr0)")
    else:
        what = f"resume from {source} (this command takes no learning-rate override)"
    return changes, settings, what, f.backoff


def _plan_crash(f: _Facts) -> Planned:
    """Rerun the command (with its resume_args) after backoff."""
    resume_args = f.run_config.get("resume_args")
    what = "resume" + (" with " + " ".join(resume_args) if resume_args else "")
    if f.run_config.get("resume_if_usable") and resume_args:  # official: only from a usable one
        what = (f"rerun with {' '.join(resume_args)} if that checkpoint is resumable then, else "
                "the original command")
    return {}, {}, what, f.delay


_PLANNERS = {decision.OOM: _plan_oom, decision.COMM: _plan_comm, decision.HANG: _plan_hang,
             decision.HOST_OOM: _plan_host_oom, decision.NAN: _plan_nan}


def comm_budget(record: dict[str, Any], restart: dict[str, Any]) -> str | None:
    """Words for a free comm retry when this failure is within the comm budget, else None (it counts).

    `record["comm_failures"]` holds the end times of the run's earlier comm failures (the supervisor keeps them).
    """
    limit = int(restart.get("comm_retries", DEFAULT_COMM_RETRIES))
    window = float(restart.get("comm_window_s", DEFAULT_COMM_WINDOW_S))
    now = float(record.get("ended") or time.time())
    recent = [t for t in record.get("comm_failures") or () if now - float(t) <= window] + [now]
    if len(recent) > limit:
        return None
    return (f"comm retry {len(recent)}/{limit} within {window / 3600:g} h, not counted against the attempt "
            "limit")


def _workers_and_cache(command: list[str], run_config: dict[str, Any], events: list[dict[str, Any]]) \
        -> tuple[int, str | None]:
    """(data-loader workers, cache mode) the attempt ran with: its flags, start event, run.yaml options.

    A command of another backend (`yolotui exec`) counts only the flags it has: (0, None) without them.
    """
    flag_workers, workers_value = flag_value(command, ("--workers",))
    flag_cache, cache_value = flag_value(command, ("--cache",))
    bare_cache = "ram" if "--cache" in command and flag_cache is None else None  # `--cache` alone means ram
    if REMEDY_WORKERS not in backend_remedies(run_config)[0]:
        return (_int(workers_value) or 0) if flag_workers else 0, cache_value or bare_cache
    options = run_config.get("options") or {}
    workers = _int((start_event(events).get("config") or {}).get("workers"))
    if workers is None:
        workers = _int(workers_value) if flag_workers else _int(options.get("workers"))
    cache = cache_value if flag_cache else (bare_cache or options.get("cache"))
    return (DEFAULT_WORKERS if workers is None else workers), cache


def host_oom_changes(record: dict[str, Any], run_config: dict[str, Any], events: list[dict[str, Any]],
                     engine: bool) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(changes, settings, words) of the host-oom remedy: half the workers, no --cache ram; empty when neither."""
    command = [str(a) for a in record.get("command") or run_config.get("command") or []]
    workers, cache = _workers_and_cache(command, run_config, events)
    args: dict[str, Any] = {}
    settings: dict[str, Any] = {}
    words = []
    if workers > 0:
        args["--workers"] = workers // 2
        settings["workers"] = [workers, workers // 2]
        words.append(f"data-loader workers {workers} -> {workers // 2}")
    if cache == "ram":
        args["--cache"] = "none" if engine else None  # the engine takes --cache none; others lose the flag
        settings["cache"] = ["ram", None]
        words.append("no --cache ram")
    if not args:
        return {}, {}, ""
    return {"args": args}, settings, "resume with " + " and ".join(words)


def apply_file_changes(run_dir: Path, changes: dict[str, Any]) -> dict[str, Any]:
    """Apply a remedy's changes to the run's files before the next attempt: `opt_yaml` (official backend: the
    options its --resume reads; the first opt.yaml kept as opt.yaml.orig). Returns {key: [was, now]}."""
    updates = changes.get("opt_yaml") or {}
    if not updates:
        return {}
    from yolotui.backends.official.opt_edit import edit_opt_yaml

    return edit_opt_yaml(Path(run_dir) / OPT_YAML, dict(updates))


def record_remedy_event(run_dir: Path, attempt: int, decision: decision.Decision) -> None:
    """Append a `remedy` event (class, message, remedy, changed settings, retry time) to events.jsonl.

    Written by the supervisor between attempts, when no trainer is writing.
    """
    EventWriter(Path(run_dir) / EVENTS_JSONL, attempt).emit(
        "remedy", failure_class=decision.failure_class, message=decision.message, remedy=decision.remedy,
        retry=decision.retry, delay_s=decision.delay_s, settings=decision.settings, changes=decision.changes,
        next_attempt=attempt + 1 if decision.retry else None,
        retry_at=round(time.time() + decision.delay_s, 3) if decision.retry else None)
