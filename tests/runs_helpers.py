"""Helpers for job-layer tests: wait for a condition, and end every process a test's runs started."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from yolotui import procs
from yolotui.runs.status import read_status


def wait_for(predicate: Callable[[], object], timeout: float = 10.0, interval: float = 0.02) -> object:
    """Poll `predicate` until it returns something truthy; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s: {predicate}")
        time.sleep(interval)


def processes_of_run(run_dir: Path) -> list[int]:
    """Live pids belonging to a run: its supervisor (by argv) and anything with YOLOTUI_RUN_DIR=run_dir."""
    run_dir = str(Path(run_dir).resolve())
    marker = f"YOLOTUI_RUN_DIR={run_dir}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        if not procs.is_alive(pid):
            continue
        argv = procs.cmdline(pid)
        if "yolotui.supervisor.process" in argv and run_dir in argv:
            found.append(pid)
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker + b"\0" in environ + b"\0":
            found.append(pid)
    return found


def kill_run(run_dir: Path) -> None:
    """SIGKILL every process (and process group) of a run; used in test teardown."""
    status = read_status(run_dir)
    if status is not None and status.trainer_pid and procs.group_members(status.trainer_pid):
        procs.signal_group(status.trainer_pid, signal.SIGKILL)
    for pid in processes_of_run(run_dir):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            pgid = os.getpgid(pid)
        except ProcessLookupError:
            continue
        if pgid != os.getpgid(0):
            procs.signal_group(pgid, signal.SIGKILL)


@pytest.fixture(autouse=True)
def reap_runs(tmp_path):
    """After the test, SIGKILL whatever is left of every run under tmp_path (import this fixture to use it)."""
    yield
    for status_file in tmp_path.rglob("status.json"):
        kill_run(status_file.parent)


def run_events(run_dir: Path) -> list[dict]:
    """Every event a run's streams hold now (events.jsonl and the batch segments), in time order: for tests of
    short runs only (yolotui's own readers never read a run's history whole)."""
    from yolotui.runs.events import read_events

    found = []
    for name in ("batches.1.jsonl", "batches.jsonl", "events.jsonl"):
        found += read_events(Path(run_dir) / name)
    return sorted(found, key=lambda e: e.get("ts") or 0)
