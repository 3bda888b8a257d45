"""Notifications from the supervisor: what a run tells you while you are away.

The supervisor (never the TUI) sends one notification when a run finishes, fails or is stopped, on every
restart (its failure class and remedy: "oom: batch 16 -> 8, accumulation x2, resuming at epoch 37 batch
120"), when the stall watchdog fires, once an attempt when GPU throttling, new uncorrected ECC errors, an Xid
or a lost GPU begin (`gpu`, yolotui/supervisor/gpu_monitor.py), and, when asked, on every new best mAP.

Targets come from two places and add up:

- settings.yaml in the config folder: `notify: {urls: [...], command: "...", best: false, timeout_s: 30}`;
- the run's own `--notify URL` flags (repeatable), recorded in run.yaml under `notify: {urls: [...]}`.

A URL is an apprise URL (ntfy://, slack://, discord://, tgram://, mailto://, json://host:port/ ...: one syntax,
no code of ours per service; apprise is the optional extra `notify`). `command` is a shell command that gets
the event as one JSON object on stdin.

A notification never blocks or kills the supervisor: each is sent by a child process
(`python -m yolotui.notify.send`) that the supervisor starts and reaps like any other child, which is
killed when it outlives its timeout; its failures are written to supervisor.log (the child's stderr) and
counted in status.json's `notifications` (sent, failed, last_error).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_TIMEOUT_S = 30.0
EVENT_KINDS = ("finished", "failed", "stopped", "interrupted", "restart", "stall", "best", "mirror", "test", "gpu")


@dataclass
class Targets:
    """Where notifications go: apprise URLs, a shell command, and whether new-best events are wanted."""

    urls: list[str] = field(default_factory=list)
    command: str | None = None
    best: bool = False
    timeout_s: float = DEFAULT_TIMEOUT_S

    def __bool__(self) -> bool:
        return bool(self.urls or self.command)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form handed to the sending child."""
        return {"urls": list(self.urls), "command": self.command, "best": self.best, "timeout_s": self.timeout_s}


def _section(mapping: Any, where: str) -> dict[str, Any]:
    """The `notify` mapping of a settings/run.yaml dict; UserError naming `where` when it has the wrong shape."""
    from yolotui.errors import UserError

    section = (mapping or {}).get("notify") if isinstance(mapping, dict) else None
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise UserError(f"{where}: 'notify' must be a mapping (urls, command, best, timeout_s)")
    urls = section.get("urls") or []
    if isinstance(urls, str):
        urls = [urls]
    if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
        raise UserError(f"{where}: notify.urls must be a list of apprise URLs")
    command = section.get("command")
    if command is not None and not isinstance(command, str):
        raise UserError(f"{where}: notify.command must be a shell command (a string)")
    return {**section, "urls": urls}


def targets_for(run_config: dict[str, Any] | None, settings: dict[str, Any] | None) -> Targets:
    """The targets of a run: settings.yaml's plus run.yaml's (URLs of both, the run's command/best winning)."""
    from yolotui.usersettings import settings_file

    user = _section(settings, str(settings_file()))
    own = _section(run_config, "run.yaml")
    urls = [*user.get("urls", []), *[u for u in own.get("urls", []) if u not in user.get("urls", [])]]
    timeout = own.get("timeout_s", user.get("timeout_s", DEFAULT_TIMEOUT_S))
    return Targets(urls=urls, command=own.get("command") or user.get("command"),
                   best=bool(own.get("best", user.get("best", False))),
                   timeout_s=max(1.0, float(timeout or DEFAULT_TIMEOUT_S)))


# ------------------------------------------------------------------------------------------- the messages

def settings_summary(settings: dict[str, Any] | None) -> str:
    """A remedy's changed settings in words: 'batch 16 -> 8, accumulation x2, workers 8 -> 4, no --cache ram'."""
    parts: list[str] = []
    for name, change in (settings or {}).items():
        if not isinstance(change, (list, tuple)) or len(change) != 2:
            continue
        was, now = change
        if name == "batch_size":
            parts.append(f"batch {was} -> {now}")
        elif name == "accumulate" and was and now:
            ratio = now / was
            parts.append(f"accumulation x{ratio:g}" if ratio == int(ratio) else f"accumulation {was} -> {now}")
        elif name == "lr_scale":
            parts.append(f"lr scale {was:g} -> {now:g}" if isinstance(was, (int, float)) else f"lr scale {now}")
        elif name == "workers":
            parts.append(f"workers {was} -> {now}")
        elif name == "cache":
            parts.append(f"no --cache {was}" if now is None else f"cache {was} -> {now}")
        elif name in ("NCCL_DEBUG", "TORCH_DISTRIBUTED_DEBUG"):
            parts.append(f"{name}={now}")
    return ", ".join(parts)


def restart_text(failure_class: str | None, settings: dict[str, Any] | None, checkpoint: dict[str, Any] | None,
                 remedy: str) -> str:
    """One line for a restart: 'oom: batch 16 -> 8, accumulation x2, resuming at epoch 37 batch 120'."""
    parts = [settings_summary(settings)]
    if checkpoint:
        parts.append(f"resuming at epoch {checkpoint.get('epoch')} batch {checkpoint.get('step')}")
    else:
        parts.append("restarting from the start (no checkpoint yet)")
    text = ", ".join(p for p in parts if p)
    return f"{failure_class or 'crash'}: {text}" + (f" ({remedy})" if remedy else "")


def make_event(kind: str, run_name: str, run_dir: str | Path, text: str, **fields: Any) -> dict[str, Any]:
    """A notification event: kind, run, run_dir, title, body, ts, plus `fields` (attempt, failure_class ...)."""
    return {"event": kind, "run": run_name, "run_dir": str(run_dir), "title": f"yolotui: {run_name} {kind}",
            "body": text, "ts": round(time.time(), 3), **fields}


# ------------------------------------------------------------------------------------------- dispatching

class Notifier:
    """Starts one sending child per notification and counts how they ended; never waits on one unasked.

    The supervisor reaps every child with waitpid(-1): it hands each pid it reaps to `reaped`, which claims
    the ones that are ours. `poll` kills children past their timeout.
    """

    def __init__(self, targets: Targets, log: Any = print, env: dict[str, str] | None = None) -> None:
        self.targets = targets
        self.log = log
        self.env = env
        self.children: dict[int, tuple[subprocess.Popen, float, str]] = {}
        self.counts: dict[str, Any] = {"sent": 0, "failed": 0, "last_error": None}

    def send(self, event: dict[str, Any]) -> None:
        """Hand `event` to a sending child (nothing when no target is configured or best events are off)."""
        if not self.targets or (event.get("event") == "best" and not self.targets.best):
            return
        payload = json.dumps({"event": event, "targets": self.targets.to_dict()}).encode()
        try:
            child = subprocess.Popen(  # an argv list, never a shell; stdout/stderr: the supervisor's log
                [sys.executable, "-m", "yolotui.notify.send"], stdin=subprocess.PIPE, env=self.env,
                close_fds=True, start_new_session=True)
        except OSError as exc:
            self._failed(event.get("event"), f"cannot start the sender: {exc}")
            return
        try:
            child.stdin.write(payload)  # small: well under a pipe's buffer, never blocks
            child.stdin.close()
        except OSError:
            pass
        self.children[child.pid] = (child, time.monotonic() + self.targets.timeout_s + 10.0, str(event.get("event")))

    def reaped(self, pid: int, wait_status: int) -> bool:
        """Record the end of child `pid` if it is one of ours; True when it was."""
        entry = self.children.pop(pid, None)
        if entry is None:
            return False
        child, _, kind = entry
        child.returncode = os.waitstatus_to_exitcode(wait_status)
        if child.returncode == 0:
            self.counts["sent"] += 1
        else:
            self._failed(kind, f"sender exited with {child.returncode} (the reasons are above in this log)")
        return True

    def poll(self) -> None:
        """Kill senders past their deadline (their end is recorded when reaped)."""
        now = time.monotonic()
        for pid, (child, deadline, kind) in list(self.children.items()):
            if now > deadline and child.returncode is None:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
                self.log(f"notify: the {kind} notification timed out; sender {pid} killed")

    def drain(self, max_s: float) -> None:
        """Wait up to `max_s` for the senders still running (at the end of the run), reaping them."""
        deadline = time.monotonic() + max_s
        while self.children and time.monotonic() < deadline:
            for pid in list(self.children):
                try:
                    got, wait_status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    self.children.pop(pid, None)
                    continue
                if got:
                    self.reaped(pid, wait_status)
            self.poll()
            time.sleep(0.05)

    def _failed(self, kind: Any, error: str) -> None:
        self.counts["failed"] += 1
        self.counts["last_error"] = f"{kind}: {error}"
        self.log(f"notify: the {kind} notification failed: {error}")


# ------------------------------------------------------------------------------------ the supervisor's events

def final_event(name: str, run_dir: Path, state: str, message: str, failure_class: str | None, remedy: str,
                attempt: int, events: list[dict[str, Any]]) -> dict[str, Any]:
    """The notification for the end of a run: finished (with its metrics), failed (class, why, remedy), stopped."""
    text = message
    if state == "finished":
        done = next((e for e in reversed(events) if e.get("type") == "done"), None)
        metrics = (done or {}).get("metrics") or {}
        if metrics.get("mAP50-95") is not None:
            text = f"{message}; mAP50 {metrics.get('mAP50', 0):.4f}, mAP50-95 {metrics['mAP50-95']:.4f}"
    elif state == "failed":
        text = f"failed ({failure_class or 'crash'}): {message}" + (f"; {remedy}" if remedy else "")
    return make_event(state, name, run_dir, text, attempt=attempt, failure_class=failure_class, remedy=remedy)


def best_event(name: str, run_dir: Path, epoch_event: dict[str, Any]) -> dict[str, Any]:
    """The notification for a new best epoch."""
    metrics = epoch_event.get("metrics") or {}
    text = (f"new best at epoch {int(epoch_event.get('epoch', 0)) + 1}/{epoch_event.get('epochs')}: "
            f"mAP50 {metrics.get('mAP50', 0):.4f}, mAP50-95 {metrics.get('mAP50-95', 0):.4f}")
    return make_event("best", name, run_dir, text, attempt=epoch_event.get("attempt"), metrics=metrics)
