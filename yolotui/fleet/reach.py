"""Each host's reachability over time: when it was last reached, since when it has been unreachable, and when
to try it again (backoff doubling from BASE_S to MAX_S, back to the normal pace once it answers)."""

from __future__ import annotations

import time
from dataclasses import dataclass

BASE_S = 5.0
MAX_S = 120.0


@dataclass
class Reach:
    """One host's link as seen so far."""

    host: str
    ok: bool = True
    since: float | None = None  # when it became unreachable
    reason: str = ""
    failures: int = 0
    next_try: float = 0.0

    def record(self, ok: bool, reason: str = "", now: float | None = None, pace_s: float = BASE_S) -> None:
        """Note one attempt's outcome and plan the next try."""
        now = time.time() if now is None else now
        if ok:
            self.ok, self.since, self.reason, self.failures = True, None, "", 0
            self.next_try = now + pace_s
            return
        if self.ok:
            self.since = now
        self.ok, self.reason = False, reason
        self.failures += 1
        self.next_try = now + min(MAX_S, BASE_S * 2 ** (self.failures - 1))

    def due(self, now: float | None = None) -> bool:
        """True when the host should be asked again."""
        return (time.time() if now is None else now) >= self.next_try

    def text(self, now: float | None = None) -> str:
        """'gpu1 ok' or 'gpu1 unreachable since 14:02, retrying in 20 s'."""
        if self.ok:
            return f"{self.host} ok"
        now = time.time() if now is None else now
        since = time.strftime("%H:%M", time.localtime(self.since or now))
        wait = max(0, round(self.next_try - now))
        return f"{self.host} unreachable since {since}, retrying" + (f" in {wait} s" if wait else "")


def unreachable_since(since: float | None) -> str:
    """'unreachable since HH:MM' (local time)."""
    return "unreachable since " + time.strftime("%H:%M", time.localtime(since or time.time()))


SEEN_FILE = "hosts_seen.json"


def remember(outcomes: dict[str, bool], now: float | None = None) -> dict[str, float]:
    """Record which hosts answered (in the state folder, for one-shot commands such as `ls --all-hosts`) and
    return, for each host that did not, since when it has been unreachable."""
    import json

    from yolotui.runs.atomic import atomic_write_text
    from yolotui.runs.index import home_dir

    now = time.time() if now is None else now
    path = home_dir() / SEEN_FILE
    try:
        with open(path, "rb") as handle:
            seen = json.loads(handle.read(1 << 20) or b"{}")
    except (OSError, ValueError, RecursionError):
        seen = {}
    if not isinstance(seen, dict):
        seen = {}
    down: dict[str, float] = {}
    for host, ok in outcomes.items():
        before = seen.get(host)
        since = before if isinstance(before, (int, float)) and not isinstance(before, bool) else None
        seen[host] = None if ok else (since or now)
        if not ok:
            down[host] = seen[host]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(seen))
    except OSError:
        pass
    return down
