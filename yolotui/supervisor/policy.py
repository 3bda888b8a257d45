"""The restart policy: classify how an attempt ended and decide whether (and how) to try again.

`decide(record, run_config, events_since_attempt)` is a pure function of what the supervisor saw, so it is
easy to test and to extend. The classes today:

- exit code 0 (and no stop requested)      -> finished, no retry
- a preemption (SIGTERM to the supervisor from outside, or the --preempt-url notice; yolotui/supervisor/spot.py)
                                           -> class `preempted`, recorded `interrupted`, no retry: resumed first by
                                              `yolotui resume --interrupted`, or restored elsewhere from its mirror
- a stop was requested (yolotui stop, or the supervisor was told to stop)
                                           -> stopped, no retry (whatever the exit code)
- killed by a signal the supervisor did not send (SIGKILL from the OOM killer, `kill` by hand ...)
                                           -> class `killed`, no retry: offered for resume
- the command could not be started        -> class `data` (a configuration error), no retry
- the stall watchdog ended it (`hang` in the record)
                                           -> class `hang`, resumed from last.pt
- SIGKILL with evidence of the kernel's OOM killer (`host_oom` in the record)
                                           -> class `host-oom`, resumed with fewer workers and no RAM cache
- out of disk space (ENOSPC / quota, in the error event or the log tail)
                                           -> class `disk`, no retry; the message names the folder and free space
- a crash after an Xid or a lost GPU (`gpu_fault` in the record, from the supervisor's GPU watcher)
                                           -> class `gpu-fault`, resumed on another free GPU or stopped
- any other nonzero exit                   -> class `crash`, retried while attempts < max_attempts

The trainer's `error` event of the attempt names the class first (oom, comm, nan, data, crash; see
`classify_events`); yolotui/supervisor/remedies.py plans each class's remedy, which may change the command: a remedy
returns `changes`, and the command for the
next attempt is `command_for_attempt(run_config, attempt, changes)`, where the accumulated changes may set
flags (`{"args": {"--batch-size": 8}}`) or environment variables (`{"env": {"NCCL_BLOCKING_WAIT": "1"}}`).
On every retry the `resume_args` list from run.yaml (e.g. `["--resume"]`) is appended to the command.
"""

from __future__ import annotations

import re
import shlex
import signal
from typing import Any

from yolotui.runs.layout import FAILED, FINISHED, INTERRUPTED, STOPPED
from yolotui.runs.runconfig import set_flag
from yolotui.supervisor.decision import CRASH, DATA, DISK, HANG, HOST_OOM, KILLED, PREEMPTED, Decision
from yolotui.supervisor.remedies import plan_remedy

# The official trainer's (and YOLOv5's) last line of a completed training; what follows it (strip_optimizer,
# the final validation, plots) can fail without making the training unfinished.
COMPLETED_LINE = re.compile(r"^\s*(\d+) epochs completed in [\d.]+ hours\.?\s*$", re.MULTILINE)

# Exit codes a shell or a trainer uses to say "I was ended by this signal" (128 + signal number).
_SIGNAL_EXIT_CODES = {128 + s: s for s in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGKILL)}
# Signals that end a process from outside; SIGSEGV, SIGABRT (e.g. NCCL's watchdog), SIGBUS ... are crashes.
_OUTSIDE_SIGNALS = frozenset({signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGKILL, signal.SIGQUIT})


def signal_name(number: int | None) -> str:
    """'SIGKILL' for 9; the number as text when unknown."""
    if number is None:
        return "?"
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def describe_exit(exit_code: int | None, exit_signal: int | None) -> str:
    """'exit code 1' / 'killed by SIGKILL' / 'did not start'."""
    if exit_signal is not None:
        return f"killed by {signal_name(exit_signal)}"
    if exit_code is None:
        return "did not start"
    return f"exit code {exit_code}"


def classify_events(events: list[dict[str, Any]]) -> tuple[str | None, str]:
    """The failure class and message named by the attempt's last `error` event, if any.

    The trainer writes `error` events with a `kind` (oom, comm, data, nan, io, crash); this returns the last
    one; yolotui/supervisor/remedies.py maps the class to its remedy.
    """
    for event in reversed(events):
        if event.get("type") == "error":
            kind = str(event.get("kind") or CRASH)
            return kind, str(event.get("message") or "")
    return None, ""


def decide(record: dict[str, Any], run_config: dict[str, Any], events_since_attempt: list[dict[str, Any]]) -> Decision:
    """Decide what follows an attempt.

    `record` is the attempt's entry in status.json's `attempts` plus supervisor facts: `stop_requested` (bool),
    `signals_sent` (signal numbers the supervisor itself sent to the trainer), and optionally `run_dir` and
    `changes_so_far` (the remedies' accumulated changes), which remedies use.
    `run_config` is run.yaml; `events_since_attempt` are the events the attempt wrote.
    """
    exit_code = record.get("exit_code")
    exit_signal = record.get("exit_signal")
    how = describe_exit(exit_code, exit_signal)

    if record.get("preempted"):  # a SIGTERM from outside or the machine's notice (yolotui/supervisor/spot.py)
        return preempted_decision(record, run_config, how)
    if record.get("stop_requested"):
        return Decision(retry=False, state=STOPPED, message=f"stopped on request ({how})")
    if record.get("spawn_error"):
        return Decision(retry=False, state=FAILED, failure_class=DATA,
                        message=f"cannot start the command: {record['spawn_error']}",
                        remedy="fix the command (is it installed and on PATH?) and start a new run")
    if record.get("hang"):  # the stall watchdog ended it: whatever the exit looks like, it was a hang
        return plan_remedy(HANG, f"{how} after a stall: {record['hang']}", record, run_config,
                           events_since_attempt, run_dir=record.get("run_dir"),
                           changes_so_far=record.get("changes_so_far"))
    event_class, event_message = classify_events(events_since_attempt)
    if exit_signal is None and exit_code == 0:
        if any(e.get("type") == "stop" for e in events_since_attempt):
            # the yolotui trainer saves a checkpoint and exits 0 on SIGTERM/SIGINT from outside: resumable
            return Decision(retry=False, state=STOPPED, message="stopped by a signal after saving a checkpoint")
        return Decision(retry=False, state=FINISHED, message="finished (exit code 0)")
    completed = completed_training(events_since_attempt, record.get("log_tail"))
    if completed:
        return Decision(retry=False, state=FINISHED,
                        message=f"finished ({completed}); the trainer then exited with {how}: a step after training "
                                "failed (the weights are written); see train.log")

    # The attempt's own error event first; then a signal nobody in yolotui sent; then the exit code (and the
    # CUDA/NCCL messages in the log tail of a command that writes no events).
    sent = set(record.get("signals_sent") or ())
    outside_signal = exit_signal if exit_signal is not None else _SIGNAL_EXIT_CODES.get(exit_code)
    if event_class is None and outside_signal == signal.SIGKILL and outside_signal not in sent \
            and record.get("host_oom"):
        return plan_remedy(HOST_OOM, f"{how} by the kernel's OOM killer: {record['host_oom']}", record,
                           run_config, events_since_attempt, run_dir=record.get("run_dir"),
                           changes_so_far=record.get("changes_so_far"))
    if event_class is None and outside_signal in _OUTSIDE_SIGNALS and outside_signal not in sent:
        name = record.get("name") or run_config.get("name") or ""
        return Decision(retry=False, state=FAILED, failure_class=KILLED,
                        message=f"{how}, not sent by yolotui",
                        remedy="not retried: something outside yolotui ended it (the OOM killer, a `kill`, "
                               f"a shutdown); resume it when the cause is gone: yolotui resume {shlex.quote(str(name))}".rstrip())
    disk = _disk_full_decision(event_class, event_message, record, run_config, how)
    if disk is not None:
        return disk
    from yolotui.supervisor.gpu_monitor import gpu_fault_decision

    fault = gpu_fault_decision(record, run_config, events_since_attempt, event_class, how)
    if fault is not None:  # a crash after an Xid or a lost GPU
        return fault
    from yolotui.failure_text import classify_text

    log_class = None if event_class else classify_text(record.get("log_tail"))
    failure_class = event_class or log_class or CRASH
    if log_class and not event_message:
        event_message = f"{log_class} error in the log: " + _matching_line(record.get("log_tail") or "", log_class)
    message = f"{how}: {event_message}" if event_message else how
    return plan_remedy(failure_class, message, record, run_config, events_since_attempt,
                       run_dir=record.get("run_dir"), changes_so_far=record.get("changes_so_far"))


def preempted_decision(record: dict[str, Any], run_config: dict[str, Any], how: str) -> Decision:
    """Class `preempted`: recorded `interrupted` (resumed first by `resume --interrupted`), never retried here."""
    from yolotui.supervisor.remedies import last_checkpoint

    name = shlex.quote(str(record.get("name") or run_config.get("name") or ""))
    checkpoint = last_checkpoint(record.get("run_dir"))
    where = (f"; checkpoint at epoch {checkpoint.get('epoch')} batch {checkpoint.get('step')}"
             if checkpoint else "; no checkpoint yet")
    return Decision(retry=False, state=INTERRUPTED, failure_class=PREEMPTED,
                    message=f"preempted: {record['preempted']} ({how}){where}",
                    remedy=f"resumable: yolotui resume {name} (after a reboot: yolotui resume --interrupted; on "
                           f"another machine: yolotui restore MIRROR/{name} first)")


def _disk_full_decision(event_class: str | None, event_message: str, record: dict[str, Any],
                        run_config: dict[str, Any], how: str) -> Decision | None:
    """Class `disk` (no retry) when the attempt failed for lack of disk space."""
    from yolotui.placement import diskspace

    if event_class not in (None, DISK, "io", CRASH):
        return None
    if event_class != DISK and not diskspace.is_disk_full(text=event_message) and \
            not (event_class is None and diskspace.is_disk_full(text=record.get("log_tail"))):
        return None
    folder = record.get("run_dir") or run_config.get("cwd") or "."
    name = record.get("name") or run_config.get("name") or ""
    return Decision(retry=False, state=FAILED, failure_class=DISK,
                    message=f"{how}: {diskspace.disk_message(folder)}",
                    remedy=f"not retried: free space on the disk holding {folder}, then resume it: "
                           f"yolotui resume {shlex.quote(str(name))}".rstrip())


def completed_training(events: list[dict[str, Any]], log_tail: str | None) -> str | None:
    """The "N epochs completed" the attempt reached (from a `done` event or the log), or None."""
    for event in reversed(events):
        if event.get("type") == "done" and event.get("completed"):
            return str(event["completed"]).rstrip(".")
    matches = COMPLETED_LINE.findall((log_tail or "").replace("\r", "\n"))
    if matches:
        return f"{matches[-1]} epochs completed"
    return None


def _matching_line(text: str, failure_class: str) -> str:
    """The last log line that shows `failure_class` (trimmed), for the message."""
    from yolotui.failure_text import classify_text

    for line in reversed(text.splitlines()):
        if classify_text(line) == failure_class:
            return line.strip()[:300]
    return ""


def merge_changes(so_far: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Accumulate remedy changes: later values of the same flag or variable win."""
    merged: dict[str, Any] = {key: dict(value) if isinstance(value, dict) else value for key, value in so_far.items()}
    for key, value in (new or {}).items():
        if isinstance(value, dict):
            merged.setdefault(key, {})
            merged[key].update(value)
        else:
            merged[key] = value
    return merged




def resume_usable(run_config: dict[str, Any]) -> bool:
    """Whether the retry may add `resume_args`: the run's backend says so (Backend.resume_usable: the official
    and ultralytics backends resume only from a resumable last.pt and rerun the original command otherwise).
    False when the backend cannot be loaded or its check fails: resume only what is known to be usable."""
    from yolotui.backends import get_backend

    try:
        return bool(get_backend(run_config.get("backend") or None).resume_usable(run_config))
    except Exception:  # a broken check must not stop the retry itself
        return False


def command_for_attempt(run_config: dict[str, Any], attempt: int, changes: dict[str, Any]) -> list[str]:
    """The argv for attempt `attempt` (1-based): the command, plus `resume_args` on retries (when
    `resume_if_usable` allows), plus flag changes."""
    argv = [str(a) for a in run_config.get("command") or []]
    if (attempt > 1 or run_config.get("resume_first")) and resume_usable(run_config):
        # resume_first: relaunched after an interruption or by `yolotui resume`
        argv += [str(a) for a in run_config.get("resume_args") or []]
    for flag, value in (changes.get("args") or {}).items():
        argv = set_flag(argv, flag, value)
    return argv


def env_for_attempt(run_config: dict[str, Any], changes: dict[str, Any]) -> dict[str, str]:
    """Environment additions for an attempt: run.yaml's `env`, then the remedies' `env` changes."""
    env = {str(k): str(v) for k, v in (run_config.get("env") or {}).items()}
    env.update({str(k): str(v) for k, v in (changes.get("env") or {}).items()})
    return env
