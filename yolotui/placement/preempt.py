"""The machine's preemption notice: `--preempt-url URL`, polled on a local address by a child of the supervisor.

Clouds announce the end of a spot/preemptible machine a little ahead (AWS about 120 s, GCP about 30 s) on the
instance's metadata service; most trainers never look. With `--preempt-url` the supervisor starts a small
child (`python -m yolotui.placement.preempt RUN URL EVERY_S`) that asks URL every EVERY_S seconds (default 5)
and, at the first notice, writes RUN/preempt.notice (JSON: url, notice, at) and exits; the supervisor then
stops the trainer at once, which checkpoints mid-epoch, records the run `interrupted` with class
`preempted`, makes the mirror's last copy and exits (yolotui/supervisor/spot.py). The poll never runs in the
supervisor itself, so a metadata service that does not answer never holds it up.

What counts as a notice: HTTP 200 with a body that says something: AWS's
`http://169.254.169.254/latest/meta-data/spot/instance-action` (404 until a notice, then JSON with the action
and time; IMDSv2's token is fetched when the service answers 401), GCP's
`http://metadata.google.internal/computeMetadata/v1/instance/preempted` ("FALSE", then "TRUE"), Azure's
scheduled events (a JSON `Events` list: empty means none). "FALSE", "false", "0", "none", "{}" and an empty
`Events` list are no notice; 404, other codes and no answer are no notice either. The headers GCP and Azure
require are always sent. URL must be http(s) on a local address: loopback, link-local (169.254.x.x), a private
network, or a host name (a metadata service's, resolved by the machine itself).
"""

from __future__ import annotations

import ipaddress
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from yolotui.errors import UserError

NOTICE_FILE = "preempt.notice"
DEFAULT_EVERY_S = 5.0
REQUEST_TIMEOUT_S = 2.0
MAX_BODY = 64 * 1024
NO_NOTICE = frozenset({"", "false", "0", "none", "null", "{}", "[]", "no"})
HEADERS = {"Metadata-Flavor": "Google", "Metadata": "true", "User-Agent": "yolotui-preempt-watch"}


def check_url(url: str) -> str:
    """`url` when it is an http(s) URL on a local address; UserError (one line) otherwise."""
    from urllib.parse import urlsplit

    text = str(url or "").strip()
    try:
        parts = urlsplit(text)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"--preempt-url {text!r}: give the http:// URL of the machine's metadata service, e.g. "
                        "http://169.254.169.254/latest/meta-data/spot/instance-action")
    try:
        address = ipaddress.ip_address(parts.hostname)
    except ValueError:
        return text  # a host name: metadata.google.internal, or one the user's network defines
    if not (address.is_loopback or address.is_link_local or address.is_private):
        raise UserError(f"--preempt-url {text}: {parts.hostname} is not a local address; the notice comes from "
                        "the machine's own metadata service (169.254.169.254, metadata.google.internal, 127.0.0.1)")
    return text


def notice_in(status: int, body: bytes) -> str | None:
    """The notice an answer carries (its text, shortened), or None when it says there is none."""
    if status != 200:
        return None
    text = body[:MAX_BODY].decode("utf-8", "replace").strip()
    if text.lower() in NO_NOTICE:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("Events"), list):
        if not data["Events"]:
            return None  # Azure: no scheduled event
        kinds = {str(e.get("EventType")) for e in data["Events"] if isinstance(e, dict)}
        if kinds and not kinds & {"Preempt", "Terminate", "Reboot", "Redeploy"}:
            return None
    return text[:500]


def _get(url: str, headers: dict[str, str], method: str = "GET") -> tuple[int, bytes]:
    from urllib.error import HTTPError, URLError
    from urllib.request import ProxyHandler, Request, build_opener

    opener = build_opener(ProxyHandler({}))  # a metadata service is never behind the user's proxy
    try:
        with opener.open(Request(url, headers=headers, method=method), timeout=REQUEST_TIMEOUT_S) as answer:
            return int(answer.status), answer.read(MAX_BODY)
    except HTTPError as exc:
        return int(exc.code), b""
    except (URLError, OSError, ValueError):
        return 0, b""


def poll_once(url: str) -> str | None:
    """Ask `url` once; the notice, or None (no notice, or no answer)."""
    status, body = _get(url, HEADERS)
    if status == 401:  # AWS IMDSv2: a session token first
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        token_status, token = _get(f"{parts.scheme}://{parts.netloc}/latest/api/token",
                                   {"X-aws-ec2-metadata-token-ttl-seconds": "300"}, method="PUT")
        if token_status == 200 and token:
            status, body = _get(url, {**HEADERS, "X-aws-ec2-metadata-token": token.decode("ascii", "replace")})
    return notice_in(status, body)


def notice_path(run_dir: Path) -> Path:
    """RUN/preempt.notice."""
    return Path(run_dir) / NOTICE_FILE


def read_notice(run_dir: Path) -> dict[str, Any] | None:
    """The notice the watcher wrote (url, notice, at), or None; a damaged file still counts as a notice."""
    path = notice_path(run_dir)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BODY)
    except OSError:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    return data if isinstance(data, dict) else {"url": None, "notice": raw[:200].decode("utf-8", "replace"),
                                                "at": time.time()}


def clear_notice(run_dir: Path) -> None:
    """Remove a notice left from an earlier life of the run folder."""
    try:
        notice_path(run_dir).unlink()
    except OSError:
        pass


class NoticeWatch:
    """The watching child of one supervisor: start it, ask for the notice, end it."""

    def __init__(self, run_dir: Path, url: str, every_s: float = DEFAULT_EVERY_S) -> None:
        self.run_dir = Path(run_dir)
        self.url = url
        self.every_s = max(0.05, float(every_s))
        self.child: Any = None

    def start(self) -> None:
        """Start the watcher (its output goes to the supervisor's log); OSError when it cannot start."""
        import subprocess

        clear_notice(self.run_dir)
        env = {**os.environ, "YOLOTUI_RUN_DIR": str(self.run_dir)}
        self.child = subprocess.Popen(
            [sys.executable, "-m", "yolotui.placement.preempt", str(self.run_dir), self.url, str(self.every_s)],
            stdin=subprocess.DEVNULL, close_fds=True, start_new_session=True, env=env)

    def notice(self) -> dict[str, Any] | None:
        """The notice, once the watcher saw one."""
        return read_notice(self.run_dir)

    def reaped(self, pid: int, _wait_status: int) -> bool:
        """True when `pid` was the watcher (it exits after a notice)."""
        if self.child is None or pid != self.child.pid:
            return False
        self.child.returncode = 0
        return True

    def close(self) -> None:
        """End the watcher."""
        import signal

        if self.child is not None and self.child.returncode is None:
            try:
                os.killpg(self.child.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                os.waitpid(self.child.pid, 0)
            except ChildProcessError:
                pass
            self.child.returncode = -signal.SIGKILL


def watch(run_dir: Path, url: str, every_s: float) -> int:
    """The watcher's loop: poll until a notice, write it, exit 0."""
    from yolotui.runs.atomic import atomic_write_json

    while True:
        started = time.monotonic()
        notice = poll_once(url)
        if notice is not None:
            atomic_write_json(notice_path(run_dir), {"url": url, "notice": notice, "at": time.time()})
            print(f"preempt-watch: notice from {url}: {notice[:200]}", file=sys.stderr, flush=True)
            return 0
        time.sleep(max(0.0, every_s - (time.monotonic() - started)))


def main(argv: list[str] | None = None) -> int:
    """`python -m yolotui.placement.preempt RUN URL EVERY_S` (the supervisor starts it)."""
    import ctypes
    import signal

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m yolotui.placement.preempt RUN_DIR URL EVERY_S", file=sys.stderr)
        return 2
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # die with the supervisor
    except (OSError, AttributeError):
        pass
    try:
        return watch(Path(args[0]), check_url(args[1]), float(args[2]))
    except (UserError, ValueError) as exc:
        print(f"preempt-watch: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
