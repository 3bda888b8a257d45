"""Every host's runs at once: `yolotui ls --json` on each host, concurrently, each call bounded in time, so
one unreachable host never holds up the others. The local machine is read in-process."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from yolotui.fleet.hosts import LOCAL, Host
from yolotui.fleet.ssh import NOT_FOUND, QUERY_TIMEOUT_S, call

MAX_RUNS_BYTES = 32 << 20  # a host's `ls --json` bigger than this is not read (hundreds of thousands of runs)


@dataclass
class HostRuns:
    """One host's reading: its runs (RunSummary dicts) or why there are none; `at` when it was read."""

    host: str
    runs: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""  # empty when read
    unreachable: bool = False  # the link failed (as opposed to yolotui failing there)
    at: float = 0.0
    gpus: str | None = None  # the GPUs in a few words, when they were read this time
    version: str | None = None  # the host's yolotui version, when it was read this time


_NUMBERS = {"attempt", "epoch", "epochs", "best_map", "started", "updated", "batch", "batches", "last_event_ts",
            "checkpoint_age"}
_TEXTS = {"name", "path", "state", "device", "failure_class", "message", "last_event_type"}


def _field(key: str, value: Any) -> Any:
    """A remote run's field as a table may show it: a finite number, a short text, or None."""
    if key in _NUMBERS:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value == value
        return value if ok and abs(value) < 1e15 else None
    if key in _TEXTS:
        return value[:500] if isinstance(value, str) else None
    if key == "slurm":
        return value if isinstance(value, dict) else None
    return None


def clean_run(run: dict[str, Any]) -> dict[str, Any]:
    """A run summary from a host with every field of the expected type (anything else dropped to None)."""
    return {key: _field(key, value) for key, value in run.items() if key in _NUMBERS | _TEXTS | {"slurm"}}


def parse_runs(text: str) -> list[dict[str, Any]]:
    """The run summaries in an `ls --json` answer, each field checked (clean_run); ValueError when it is not
    a JSON list of objects."""
    if len(text) > MAX_RUNS_BYTES:
        raise ValueError(f"answer over {MAX_RUNS_BYTES >> 20} MiB")
    data = json.loads(text or "[]")
    if not isinstance(data, list):
        raise ValueError("not a JSON list")
    runs = []
    for item in data:
        if isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(item.get("state"), str):
            runs.append(clean_run(item))
    return runs


def read_host(host: Host, timeout: float = QUERY_TIMEOUT_S) -> HostRuns:
    """`yolotui ls --json` on `host`; never raises."""
    reply = call(host, ["ls", "--json"], timeout=timeout)
    now = time.time()
    if reply.link_failed:
        return HostRuns(host.name, error=reply.reason(), unreachable=True, at=now)
    if reply.returncode == NOT_FOUND:
        from yolotui.fleet.probe import INSTALL_HINT

        return HostRuns(host.name, error=f"yolotui not found there ({host.command}); {INSTALL_HINT}", at=now)
    try:
        runs = parse_runs(reply.stdout)
    except (ValueError, RecursionError) as exc:
        return HostRuns(host.name, error=f"ls --json: {reply.reason() if reply.returncode else exc}", at=now)
    return HostRuns(host.name, runs, at=now)


def read_local() -> HostRuns:
    """This machine's runs, read in-process."""
    from yolotui.runs.summary import summarize_all

    try:
        return HostRuns(LOCAL, [s.to_dict() for s in summarize_all()], at=time.time())
    except Exception as exc:  # a library bug reads as a line, never takes the other hosts down
        return HostRuns(LOCAL, error=f"could not read the runs: {exc}", at=time.time())


def read_all(hosts: list[Host], timeout: float = QUERY_TIMEOUT_S, local: bool = True) -> list[HostRuns]:
    """The local runs (when `local`) and every host's, queried concurrently; returns within about `timeout`."""
    if not hosts:
        return [read_local()] if local else []
    with ThreadPoolExecutor(max_workers=min(16, len(hosts))) as pool:
        futures = [pool.submit(read_host, host, timeout) for host in hosts]
        mine = [read_local()] if local else []
        return mine + [future.result() for future in futures]
