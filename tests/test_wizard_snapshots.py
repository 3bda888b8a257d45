"""Snapshot tests (pytest-textual-snapshot) of each wizard at 80x24.

Deterministic: the working folder is a temp folder (paths shown relative), a fake GPU, a fake diagnosis with fixed
ages, cursor blink off. Update with `pytest tests/test_wizard_snapshots.py --snapshot-update` after an intended change.
"""

from __future__ import annotations

import pytest
from textual.widgets import Input
from tui_fakes import FakeSampler, wait_until
from wizard_kit import CaptureLauncher, HostApp, fake_diagnosis, make_data, make_plain_run, make_source_run

from yolotui.tui.screens.confirm_stop import ConfirmStopScreen
from yolotui.tui.screens.wizard_finetune import FinetuneWizard
from yolotui.tui.screens.wizard_new_run import NewRunWizard
from yolotui.tui.screens.wizard_resume import ResumeWizard

SIZE = (80, 24)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_data(tmp_path / "data")
    return tmp_path


def settle(ready):
    async def run_before(pilot) -> None:
        assert await wait_until(pilot, lambda: ready(pilot.app.wizard), timeout=20)
        for box in pilot.app.screen.query(Input):
            box.cursor_blink = False
        await pilot.pause()  # every widget has processed its pending messages (layout included): drawn
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
    return run_before


def test_new_run_snapshot(workdir, snap_compare):
    app = HostApp(lambda: NewRunWizard(CaptureLauncher(), sampler=FakeSampler(), values={"data": "data/data.yaml"}))
    assert snap_compare(app, terminal_size=SIZE,
                        run_before=settle(lambda w: w.gpu_indices is not None and w.data_facts is not None))


def test_new_run_errors_snapshot(workdir, snap_compare):
    app = HostApp(lambda: NewRunWizard(CaptureLauncher(), sampler=FakeSampler(),
                                       values={"data": "data/none.yaml", "device": "5", "epochs": "0"}))

    async def run_before(pilot) -> None:
        await settle(lambda w: w.gpu_indices is not None)(pilot)
        await pilot.press("ctrl+s")
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


@pytest.mark.parametrize("kind", ["oom", "finished", "corrupt"])
def test_resume_snapshot(workdir, snap_compare, kind):
    run_dir = make_plain_run(workdir / "runs" / "exp")
    app = HostApp(lambda: ResumeWizard(run_dir, CaptureLauncher(), diagnose=lambda p: fake_diagnosis(p, kind)))
    assert snap_compare(app, terminal_size=SIZE, run_before=settle(lambda w: w.facts is not None))


def test_finetune_snapshot(workdir, snap_compare):
    make_source_run(workdir / "runs" / "src", nc=3)
    app = HostApp(lambda: FinetuneWizard("runs/src", CaptureLauncher(), values={"data": "data/data.yaml"}))
    assert snap_compare(app, terminal_size=SIZE, run_before=settle(lambda w: {"source", "data"} <= set(w.checked)))


def test_stop_snapshot(workdir, snap_compare):
    run_dir = make_plain_run(workdir / "runs" / "exp")
    app = HostApp(lambda: ConfirmStopScreen(run_dir, CaptureLauncher(), state_reader=lambda p: "running"))
    assert snap_compare(app, terminal_size=SIZE, run_before=settle(lambda w: w.initial_state is not None))
