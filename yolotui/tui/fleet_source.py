"""The home screen's source for other machines: every configured host's runs, read off the UI thread, each
host on its own backoff (a host that drops is asked again after 5, 10, 20 ... s, at most 2 min, and comes
back by itself), and one line saying how each host is ("hostb unreachable since 14:02, retrying in 20 s").

Remote rows are RunSummary objects whose `name` is tagged `HOST:NAME` and whose `path` is the row key
`ssh://HOST/NAME`; `remote_key()` reads such a key back. The local machine stays the table's own source.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from yolotui.fleet.hosts import LOCAL, Host, load_hosts
from yolotui.fleet.reach import Reach
from yolotui.fleet.remote_runs import HostRuns, read_host
from yolotui.runs.summary import RunSummary

KEY_PREFIX = "ssh://"
POLL_S = 5.0  # a reachable host is read this often
GPU_EVERY_S = 30.0  # and its GPUs this often
TIMEOUT_S = 15.0  # one host's `ls --json`, at most


def row_key(host: str, name: str) -> str:
    """The table key of a remote run."""
    return f"{KEY_PREFIX}{host}/{name}"


def remote_key(key: str | None) -> tuple[str, str] | None:
    """(host, run name) for a remote row's key; None for a local run folder."""
    if not key or not key.startswith(KEY_PREFIX):
        return None
    host, _, name = key[len(KEY_PREFIX):].partition("/")
    return (host, name) if host and name else None


def _summary(host: str, run: dict) -> RunSummary:
    name = str(run["name"])[:200]
    fields = {k: run.get(k) for k in RunSummary.__slots__ if k not in ("name", "path", "state")}
    summary = RunSummary(f"{host}:{name}", row_key(host, name), str(run["state"])[:40], **fields)
    summary.attempt = summary.attempt or 0
    return summary


class FleetSource:
    """Every configured host's latest runs and reachability (call `poll_due` from a worker thread)."""

    def __init__(self, hosts: list[Host] | None = None, timeout: float = TIMEOUT_S) -> None:
        self.hosts = list(load_hosts() if hosts is None else hosts)
        self.timeout = timeout
        self.reach = {h.name: Reach(h.name) for h in self.hosts}
        self.runs: dict[str, list[RunSummary]] = {h.name: [] for h in self.hosts}
        self.problems: dict[str, str] = {}  # host -> what failed there although it was reached
        self.versions: dict[str, str] = {}  # host -> its yolotui version (asked once)
        self.gpus: dict[str, str] = {}  # host -> '2x H100 (97% util, 130/160 GiB)'
        self._gpu_at: dict[str, float] = {}

    def due(self, now: float | None = None) -> list[Host]:
        """The hosts to ask now."""
        return [h for h in self.hosts if self.reach[h.name].due(now)]

    def poll_due(self, now: float | None = None) -> list[HostRuns]:
        """Read the due hosts concurrently (blocking: never on the UI thread); each within the timeout."""
        due = self.due(now)
        if not due:
            return []
        with ThreadPoolExecutor(max_workers=min(8, len(due))) as pool:
            return list(pool.map(self._read, due))

    def _read(self, host: Host) -> HostRuns:
        from yolotui.fleet.probe import gpus_text, read_gpus

        reading = read_host(host, self.timeout)
        if not reading.error and host.name not in self.versions:
            from yolotui.fleet.ssh import call

            reply = call(host, ["--version"], timeout=self.timeout)
            if reply.returncode == 0:
                reading.version = reply.stdout.strip().removeprefix("yolotui").strip()[:40]
        if not reading.error and time.time() - self._gpu_at.get(host.name, 0.0) >= GPU_EVERY_S:
            gpus, _ = read_gpus(host, self.timeout)
            reading.gpus = gpus_text(gpus)
        return reading

    def apply(self, readings: list[HostRuns], now: float | None = None) -> None:
        """Take in readings (on the UI thread): runs replaced where read; reachability and next tries noted."""
        now = time.time() if now is None else now
        for reading in readings:
            reach = self.reach.get(reading.host)
            if reach is None:
                continue
            reach.record(not reading.unreachable, reading.error, now, POLL_S)
            self.problems[reading.host] = "" if reading.unreachable else reading.error  # reached; yolotui failed
            if reading.version is not None:
                self.versions[reading.host] = reading.version
            if reading.gpus is not None:
                self.gpus[reading.host] = reading.gpus
                self._gpu_at[reading.host] = now
            if not reading.error:
                self.runs[reading.host] = [_summary(reading.host, run) for run in reading.runs]

    def summaries(self) -> list[RunSummary]:
        """Every remote run known (a host's last reading is kept while it is unreachable)."""
        return [s for host in self.hosts for s in self.runs[host.name]]

    def _version_note(self, host: str) -> str:
        """'' when the host runs this yolotui version; else which side is older (`yolotui hosts ls` says more)."""
        from yolotui import __version__
        from yolotui.fleet.probe import parse_version

        theirs, mine = parse_version(self.versions.get(host, "")), parse_version(__version__)
        if theirs is None or mine is None or theirs == mine:
            return ""
        side = "older" if theirs < mine else "newer"
        return f" [yolotui {self.versions[host]}, {side}: see yolotui hosts ls]"

    def host_of(self, name: str) -> Host | None:
        """The configured host called `name`."""
        return next((h for h in self.hosts if h.name == name), None)

    def status_line(self, now: float | None = None) -> str:
        """'hosts: local ok · hosta ok · hostb unreachable since 14:02, retrying in 20 s'."""
        parts = [f"{LOCAL} ok"]
        for host in self.hosts:
            reach = self.reach[host.name]
            text = reach.text(now) if reach.next_try else f"{host.name} connecting…"
            if reach.ok and self.problems.get(host.name):
                text = f"{host.name}: {self.problems[host.name]}"
            elif reach.ok and host.name in self.gpus:
                text += f" ({self.gpus[host.name]})"
            parts.append(text + self._version_note(host.name))
        return "hosts: " + " · ".join(parts)
