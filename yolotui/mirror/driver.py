"""The supervisor's side of the mirror: when to copy, one copy at a time, reports, and the last copy at the end.

The supervisor calls `step()` on every look at the trainer (twice a second): when a checkpoint or its manifest
changed since the last look, a copy is due; it starts a copying child (yolotui.mirror.copy) when none runs,
else the next copy starts when the running one ends, with whatever is newest then, so copies never pile up
and training never waits on one. A copy that fails is tried again `retry_s` later (or at the next
checkpoint); one running `slow_s` is reported slow, one running `timeout_s` is ended and counted failed.
Each failure streak is reported once (status.json's `mirror`, the dashboard, a `mirror` notification) and
so is the recovery. Nothing here can end the run: every error becomes a line in the record.

`flush(max_s)` at the run's end (finished, stopped, preempted, failed) waits for a running copy (or ends it when
it copies an outdated checkpoint) and makes one last copy, with the final status.json, within `max_s`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from yolotui.mirror.copy import result_path
from yolotui.mirror.settings import MirrorSettings
from yolotui.mirror.snapshot import CHECKPOINTS, read_manifest
from yolotui.runs.layout import WEIGHTS_DIR

IDLE, COPYING, OK, FAILING = "idle", "copying", "ok", "failing"


class MirrorDriver:
    """Copies of one run to its target, driven by the supervisor's poll (see the module docstring)."""

    def __init__(self, run_dir: Path, settings: MirrorSettings, log: Callable[[str], Any] = print,
                 notify: Callable[[str], Any] | None = None, env: dict[str, str] | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.settings = settings
        self.log = log
        self.notify = notify or (lambda text: None)
        self.env = env
        self.child: subprocess.Popen | None = None
        self.child_started = 0.0
        self.child_signature: tuple | None = None
        self.killed_why: str | None = None
        self.superseded = False  # the running copy was ended on purpose at the run's end: no failure
        self.slow_told = False  # a slow target is reported once, until a copy succeeds again
        self.ending = False  # flush() is making the last copy
        self.seen = self.signature()
        self.pending = any(part is not None for part in self.seen)  # a resumed run: refresh the mirror at once
        self.retry_at = 0.0
        self.record: dict[str, Any] = {
            "target": settings.target, "state": IDLE, "copies": 0, "failures": 0, "last_ok": None,
            "last_ok_epoch": None, "last_ok_step": None, "last_error": None, "last_error_at": None,
            "slow": False, "copying_since": None,
        }

    # -- what changed ---------------------------------------------------------------------------------------
    def signature(self) -> tuple:
        """(inode, size, mtime) of each checkpoint and manifest; a change means a new checkpoint."""
        parts = []
        for name in CHECKPOINTS:
            for file_name in (name, name + ".json"):
                try:
                    st = os.stat(self.run_dir / WEIGHTS_DIR / file_name)
                except OSError:
                    parts.append(None)
                    continue
                parts.append((st.st_ino, st.st_size, st.st_mtime_ns))
        return tuple(parts)

    # -- the poll -------------------------------------------------------------------------------------------
    def step(self, now: float | None = None) -> bool:
        """One look; True when the record changed (the supervisor then rewrites status.json)."""
        now = time.monotonic() if now is None else now
        current = self.signature()
        if current != self.seen:  # a new checkpoint: copy it now, even while waiting to retry a failure
            self.seen, self.pending, self.retry_at = current, True, 0.0
        if self.child is not None:
            return self._watch_child(now)
        if self.pending and now >= self.retry_at:
            return self.start()
        return False

    def request(self) -> None:
        """Ask for a copy at the next step (e.g. the run's state changed)."""
        self.pending = True
        self.retry_at = 0.0

    def start(self) -> bool:
        """Start a copying child now (when none runs); True when the record changed."""
        if self.child is not None:
            return False
        try:
            result_path(self.run_dir).unlink()
        except OSError:
            pass
        env = dict(self.env if self.env is not None else os.environ)
        env["YOLOTUI_RUN_DIR"] = str(self.run_dir)
        argv = [sys.executable, "-m", "yolotui.mirror.copy", str(self.run_dir), self.settings.target,
                "--tries", str(self.settings.tries), "--backoff", str(self.settings.backoff_s)]
        self.pending = False
        try:
            self.child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, close_fds=True, env=env,
                                          start_new_session=True, cwd=str(self.run_dir))
        except OSError as exc:
            return self._failed(f"cannot start the copy: {exc.strerror or exc}", time.monotonic())
        self.child_started = time.monotonic()
        self.child_signature = self.seen
        self.killed_why = None
        self.record.update(state=COPYING, copying_since=time.time())
        return True

    def _watch_child(self, now: float) -> bool:
        """Report a slow copy; end one past its timeout."""
        running = now - self.child_started
        changed = False
        if running >= self.settings.slow_s and not self.record["slow"]:
            self.record["slow"] = True
            text = f"mirror to {self.settings.target} is slow: copying for {running:.0f} s; training goes on"
            self.log(f"warning: {text}")
            if not self.slow_told:
                self.slow_told = True
                self.notify(text)
            changed = True
        if running >= self.settings.timeout_s and self.killed_why is None:
            self.killed_why = f"the copy took longer than {self.settings.timeout_s:g} s and was ended"
            self._kill()
        return changed

    def _kill(self) -> None:
        if self.child is None:
            return
        try:
            os.killpg(self.child.pid, signal.SIGKILL)  # rsync and ssh with it: it leads its own group
        except OSError:
            pass

    # -- a copy ended ---------------------------------------------------------------------------------------
    def reaped(self, pid: int, wait_status: int) -> bool:
        """Record the end of child `pid` when it is our copy; True when it was."""
        if self.child is None or pid != self.child.pid:
            return False
        self.child.returncode = os.waitstatus_to_exitcode(wait_status)
        self._ended(self.child.returncode)
        return True

    def _ended(self, code: int) -> None:
        self.child = None
        now = time.monotonic()
        result = _read_result(self.run_dir)
        self.record.update(slow=False, copying_since=None)
        superseded, self.superseded = self.superseded, False
        if superseded and not (code == 0 and result.get("ok")):
            self.record["state"] = IDLE if self.record["failures"] == 0 else FAILING
            return
        if code == 0 and result.get("ok"):
            recovered = self.record["failures"] > 0
            self.slow_told = self.slow_told and running_s(result) >= self.settings.slow_s
            self.record.update(state=OK, copies=self.record["copies"] + 1, failures=0, last_ok=time.time(),
                               last_ok_epoch=result.get("epoch"), last_ok_step=result.get("step"))
            if recovered:
                text = f"mirror to {self.settings.target} works again"
                self.log(text)
                self.notify(text)
            return
        error = self.killed_why or str(result.get("error") or f"the copy ended with exit code {code}")
        self._failed(error, now)

    def _failed(self, error: str, now: float) -> bool:
        first = self.record["failures"] == 0
        self.record.update(state=FAILING, failures=self.record["failures"] + 1, last_error=error[:500],
                           last_error_at=time.time(), slow=False, copying_since=None)
        self.pending = True  # try again: at the next checkpoint, or retry_s from now
        self.retry_at = now + self.settings.retry_s
        self.log(f"warning: mirror to {self.settings.target} failed: {error}" + ("" if self.ending else
                 f"; training goes on, next try in {self.settings.retry_s:g} s or at the next checkpoint"))
        if first:
            self.notify(f"mirror to {self.settings.target} failed: {error}; training goes on and the copy is retried")
        return True

    # -- the end --------------------------------------------------------------------------------------------
    def _wait(self, deadline: float) -> bool:
        """Wait for the running copy until `deadline`; True when it ended."""
        while self.child is not None:
            try:
                pid, wait_status = os.waitpid(self.child.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: its result file says how it went
                self._ended(0 if _read_result(self.run_dir).get("ok") else 1)
                return True
            if pid:
                self.reaped(pid, wait_status)
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def flush(self, max_s: float | None = None) -> None:
        """The last copy of the run (see the module docstring), within `max_s` (default: flush_s)."""
        limit = self.settings.flush_s if max_s is None else max_s
        self.ending = True
        deadline = time.monotonic() + limit
        self.seen = self.signature()
        if self.child is not None and self.child_signature != self.seen:
            self.superseded = True  # it copies an older checkpoint: the last copy replaces it
            self._kill()
        if not self._wait(deadline):
            self.killed_why = f"the copy did not finish within {limit:g} s of the run's end"
            self._kill()
            self._wait(time.monotonic() + 5.0)
            return
        self.start()
        if not self._wait(deadline):
            self.killed_why = f"the last copy did not finish within {limit:g} s of the run's end"
            self._kill()
            self._wait(time.monotonic() + 5.0)

    def close(self) -> None:
        """End a copy still running (the supervisor is exiting)."""
        if self.child is not None:
            self._kill()
            self._wait(time.monotonic() + 5.0)


def _read_result(run_dir: Path) -> dict[str, Any]:
    """The last copy's result record (bounded read; {} when absent or damaged)."""
    try:
        found = read_manifest(result_path(run_dir))
    except Exception:  # a planted link or another oddity: no result
        return {}
    return found[0] if found is not None else {}


def running_s(result: dict[str, Any]) -> float:
    """How long a finished copy ran, from its result record (0 when unknown)."""
    seconds = result.get("seconds")
    return float(seconds) if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) else 0.0


def describe(record: dict[str, Any] | None, now: float | None = None) -> str | None:
    """status.json's `mirror` in one line ('ok, last copy 2m ago (epoch 3 batch 12) -> s3://b/runs'), or None."""
    from yolotui.formatting import age

    if not isinstance(record, dict):
        return None
    now = time.time() if now is None else now
    state = str(record.get("state") or "?")
    target = record.get("target") or "(no target)"
    last_ok = record.get("last_ok")
    when = f"last copy {age(now - last_ok)} ago" if isinstance(last_ok, (int, float)) else "no copy yet"
    if isinstance(record.get("last_ok_epoch"), int) and isinstance(last_ok, (int, float)):
        when += f" (epoch {record['last_ok_epoch']} batch {record.get('last_ok_step') or 0})"
    if state == FAILING:
        return (f"failing ({record.get('failures') or 1}x: {record.get('last_error') or 'unknown error'}); "
                f"{when} -> {target}")
    if state == COPYING:
        since = record.get("copying_since")
        running = f" for {age(now - since)}" if isinstance(since, (int, float)) else ""
        return f"copying{running}{' (slow)' if record.get('slow') else ''}; {when} -> {target}"
    return f"{state}, {when} -> {target}"
