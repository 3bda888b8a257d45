"""A remote run followed live: `yolotui watch RUN --json` on the host, read line by line, reconnecting with
backoff when the link drops (each reconnect starts again from the tail, so nothing is read twice unbounded).

`follow()` yields dicts: the remote lines (`{"type": "status", ...}`, events, `{"type": "end", ...}`) and its
own `{"type": "link", "state": "lost"|"back", "reason": ...}` lines. It ends when the run ends, or when
`stop()` says so. A silent link is noticed by the heartbeats `watch` sends: no line for STALE_S ends the
attempt and a new one starts.
"""

from __future__ import annotations

import json
import selectors
import subprocess
import time
from collections.abc import Callable, Iterator

from yolotui.fleet.hosts import Host
from yolotui.fleet.ssh import ssh_argv

STALE_S = 20.0  # watch sends a heartbeat every few seconds; this long without a line: the link is dead
BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0)
MAX_LINE = 1 << 20


def follow(host: Host, run: str, stop: Callable[[], bool] = lambda: False,
           sleep: Callable[[float], None] = time.sleep) -> Iterator[dict]:
    """Yield the run's lines (see the module docstring) until it ends or `stop()`."""
    failures = 0
    lost = False
    while not stop():
        ended, got_any, reason = yield from _one_attempt(host, run, stop, lost)
        if ended or stop():
            return
        if got_any:
            failures = 0
        if not lost:
            yield {"type": "link", "state": "lost", "host": host.name, "reason": reason, "ts": time.time()}
            lost = True
        delay = BACKOFF_S[min(failures, len(BACKOFF_S) - 1)]
        failures += 1
        waited = 0.0
        while waited < delay and not stop():
            sleep(0.2)
            waited += 0.2


def _one_attempt(host: Host, run: str, stop: Callable[[], bool], lost: bool):
    """One ssh session of `watch --json`: (the run ended, any line came, why it stopped)."""
    try:
        proc = subprocess.Popen(ssh_argv(host, ["watch", run, "--json"]), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        return False, False, f"cannot run ssh: {exc.strerror or exc}"
    got_any, buffer, reason = False, b"", "the link dropped"
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    last = time.monotonic()
    try:
        while not stop():
            if not selector.select(timeout=0.5):
                if time.monotonic() - last > STALE_S:
                    return False, got_any, f"no answer for {STALE_S:.0f} s"
                continue
            chunk = proc.stdout.read1(65536)
            if not chunk:
                break
            last = time.monotonic()
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            if len(buffer) > MAX_LINE:
                buffer = b""
            for raw in lines:
                item = _parse(raw)
                if item is None:
                    continue
                if not got_any and lost:
                    yield {"type": "link", "state": "back", "host": host.name, "ts": time.time()}
                got_any = True
                if item.get("type") == "heartbeat":
                    continue
                yield item
                if item.get("type") == "end":
                    return True, True, ""
        try:
            code = proc.wait(timeout=5) if not stop() else None
        except subprocess.TimeoutExpired:
            code = None
        err = proc.stderr.read(4096).decode(errors="replace").strip().splitlines() if code is not None else []
        if code not in (None, 255) and not got_any:  # the remote yolotui refused (no such run, too old)
            yield {"type": "error", "host": host.name, "message": err[-1][:300] if err else f"exit code {code}"}
            return True, False, ""
        if err:
            reason = err[-1][:200]
        return False, got_any, reason
    finally:
        selector.close()
        _end(proc)


def _parse(raw: bytes) -> dict | None:
    try:
        item = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return item if isinstance(item, dict) else None


def _end(proc: subprocess.Popen) -> None:
    for handle in (proc.stdin, proc.stdout, proc.stderr):
        try:
            handle.close()
        except OSError:
            pass
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
