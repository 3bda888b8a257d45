"""Snapshot tests (pytest-textual-snapshot) of the home screen as a cockpit: 0, 1 and 12 runs (running, failed,
queued, finished, stopped) on a fake 8-GPU machine, at 80x24, 120x40 and 200x60; and a CPU-only machine.

Deterministic: a fixed clock, fixture runs with fixed times and paces, fixed GPU readings, UTC.
Update with `pytest tests/test_tui_cockpit_snapshots.py --snapshot-update` after an intended change, and look
at the SVGs that changed.
"""

from __future__ import annotations

import time

import pytest
from cockpit_fixtures import cockpit_runs, eight_gpu_sampler
from test_tui_snapshots import wait_loaded
from tui_fakes import FakeSampler
from tui_fixtures import FIXED_NOW

from yolotui.tui.app import YolotuiApp

SIZES = [(80, 24), (120, 40), (200, 60)]


@pytest.fixture
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def make_app(sampler) -> YolotuiApp:
    return YolotuiApp(theme="yolo-night", sampler=sampler, clock=lambda: FIXED_NOW, gpu_interval=None,
                      remember_theme=False)


@pytest.mark.parametrize("count", [0, 1, 12], ids=["0runs", "1run", "12runs"])
@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_home_cockpit_snapshot(utc, tmp_path, snap_compare, size, count):
    runs = cockpit_runs(tmp_path / "runs", count)
    try:
        assert snap_compare(make_app(eight_gpu_sampler()), terminal_size=size, run_before=wait_loaded)
    finally:
        for run in runs:
            run.release()


def test_home_cockpit_cpu_only_snapshot(utc, tmp_path, snap_compare):
    runs = cockpit_runs(tmp_path / "runs", 12)
    try:
        assert snap_compare(make_app(FakeSampler(gpu=False)), terminal_size=(120, 30), run_before=wait_loaded)
    finally:
        for run in runs:
            run.release()
