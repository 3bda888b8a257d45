"""Sends one notification to every target: `python -m yolotui.notify.send` with JSON on stdin.

stdin: {"event": {...}, "targets": {"urls": [...], "command": "...", "timeout_s": 30}}. Each apprise URL gets
the event's title and body (apprise's own timeouts bound each post); the command runs through the shell with
the event as JSON on stdin and is killed after the timeout. One line per failed target goes to stderr (the
supervisor's log); the exit code is the number of targets that failed (0: all sent).

`send_all` is also what `yolotui notify test` calls in its own process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from yolotui.notify.redact import command_label, scrub, target_label


class _Reasons:
    """Collects apprise's warnings while one URL is notified (its reason for a failure), secrets scrubbed."""

    def __init__(self) -> None:
        import logging

        self.lines: list[str] = []
        outer = self

        class Handler(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                try:
                    outer.lines.append(record.getMessage())
                except Exception:  # noqa: BLE001 - a bad log record must not stop the sending
                    pass

        self.handler = Handler(logging.WARNING)
        self.logger = logging.getLogger("apprise")

    def __enter__(self) -> _Reasons:
        self.logger.addHandler(self.handler)
        return self

    def __exit__(self, *_exc: object) -> None:
        self.logger.removeHandler(self.handler)


def send_urls(urls: list[str], title: str, body: str, timeout_s: float) -> list[str]:
    """Post to each apprise URL; the error lines of the ones that failed (targets named by `target_label`,
    never in full: their tokens stay out of logs)."""
    if not urls:
        return []
    try:
        import apprise
    except ImportError:
        return [f"{len(urls)} URL(s) not notified: apprise is not installed (pip install 'yolotui[notify]')"]
    errors: list[str] = []
    for url in urls:
        label = target_label(url)
        sender = apprise.Apprise()
        if not sender.add(url):
            errors.append(f"{label}: not an apprise URL apprise understands")
            continue
        for server in sender:  # every apprise plugin honours these two timeouts (connect, read)
            for attr in ("socket_connect_timeout", "socket_read_timeout"):
                if hasattr(server, attr):
                    setattr(server, attr, float(timeout_s))
        with _Reasons() as reasons:
            try:
                ok = sender.notify(title=title, body=body)
            except Exception as exc:  # noqa: BLE001 - a plugin's bug must not hide the other targets
                ok, detail = False, f"{type(exc).__name__}: {exc}"
            else:
                detail = ("the service did not accept it"
                          + (f" ({reasons.lines[-1]})" if reasons.lines else ""))
        if not ok:
            errors.append(f"{label}: {scrub(detail, [url])[:300]}")
    return errors


def run_command(command: str | None, event: dict[str, Any], timeout_s: float) -> list[str]:
    """Run the hook command with the event as JSON on stdin; an error line when it fails or times out (the
    command named by `command_label`, its stderr scrubbed of the command's words: it may hold a token)."""
    if not command:
        return []
    label = command_label(command)
    try:
        done = subprocess.run(command, shell=True, input=json.dumps(event).encode(),  # noqa: S602 - the user's hook
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout_s,
                              start_new_session=True)
    except subprocess.TimeoutExpired:
        return [f"{label}: still running after {timeout_s:g} s; killed"]
    except OSError as exc:
        return [f"{label}: cannot run it ({scrub(str(exc), [command])})"]
    if done.returncode != 0:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        return [f"{label}: exit code {done.returncode} {scrub(tail[0], [command])[:200]}".rstrip()]
    return []


def send_all(event: dict[str, Any], targets: dict[str, Any]) -> list[str]:
    """Send `event` to every target; the error lines (empty when all were sent)."""
    timeout = float(targets.get("timeout_s") or 30.0)
    return [*send_urls(list(targets.get("urls") or []), str(event.get("title") or "yolotui"),
                       str(event.get("body") or ""), timeout),
            *run_command(targets.get("command"), event, timeout)]


def main() -> int:
    """Read the request from stdin, send it, report failures on stderr; exit code = failed targets."""
    try:
        request = json.loads(sys.stdin.buffer.read(1 << 20) or b"{}")
        event, targets = dict(request["event"]), dict(request["targets"])
    except (ValueError, KeyError, TypeError) as exc:
        print(f"notify: bad request on stdin: {exc}", file=sys.stderr, flush=True)
        return 1
    errors = send_all(event, targets)
    for error in errors:
        print(f"notify: {event.get('event')}: {error}", file=sys.stderr, flush=True)
    return min(len(errors), 100)


if __name__ == "__main__":
    raise SystemExit(main())
