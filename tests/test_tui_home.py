"""Pilot tests of the home screen (runs table) against fixture run folders."""

from __future__ import annotations

import os
import time

import pytest
from tui_fakes import FakeSampler, wait_until
from tui_fixtures import FIXED_NOW, Appender, make_run, standard_runs

from yolotui.runs.atomic import atomic_write_json
from yolotui.runs.status import read_status, status_path
from yolotui.tui.app import YolotuiApp
from yolotui.tui.screens.dashboard import DashboardScreen
from yolotui.tui.screens.home import COLUMNS, HomeScreen

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def runs(tmp_path):
    made = standard_runs(tmp_path / "runs")
    yield made
    for run in made.values():
        run.release()


def make_app(**kwargs) -> YolotuiApp:
    return YolotuiApp(sampler=FakeSampler(), clock=lambda: FIXED_NOW, gpu_interval=None, **kwargs)


def table_rows(app) -> dict[str, list[str]]:
    table = app.home.query_one("#runs")
    rows = {}
    for index in range(table.row_count):
        cells = [str(cell) for cell in table.get_row_at(index)]
        rows[cells[0]] = cells
    return rows


async def test_home_lists_every_run_with_state_epoch_map_and_checkpoint(runs):
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_until(pilot, lambda: app.home.loaded)
        rows = table_rows(app)
        assert set(rows) == {"coco-finished", "shapes-running", "bad-data-failed", "ssh-interrupted", "torn-corrupt"}
        col = {name: COLUMNS.index(name) for name in COLUMNS}
        assert [rows["coco-finished"][col[k]] for k in ("state", "epoch", "mAP50-95")] == ["finished", "10/10", "0.4550"]
        assert rows["shapes-running"][1] == "running #2"  # its lock is held: live
        assert rows["shapes-running"][2] == "3/20"
        assert rows["shapes-running"][col["progress"]].startswith("█░░░░░░░  18%")  # 3 epochs + half of one, of 20
        assert rows["bad-data-failed"][1] == "failed"
        assert rows["bad-data-failed"][col["progress"]] == "data · data.yaml: key '…"  # the failure class
        assert rows["bad-data-failed"][col["checkpoint"]] == "none"  # no checkpoint written
        assert rows["ssh-interrupted"][1] == "interrupted"  # status says running, nobody holds the lock
        assert rows["torn-corrupt"][col["checkpoint"]] == "2m corrupt"
        assert rows["coco-finished"][col["checkpoint"]] == "2m finished"
        assert rows["ssh-interrupted"][col["checkpoint"]] == "2m resumable"
        assert rows["coco-finished"][col["trend"]] == "▁▁▂▃▄▄▅▆▇█"  # mAP50-95 of its 10 epochs, rising
        assert rows["coco-finished"][col["backend"]] == "command"  # status.json's backend: exec, by its label
        assert "5 runs, 1 running" in str(app.home.query_one("#home-message").render())


async def test_home_sort_filter_and_enter_opens_the_dashboard(runs):
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        assert await wait_until(pilot, lambda: app.home.loaded)
        # Newest first by default.
        assert [r.summary.name for r in app.home.visible_rows()][0] == "shapes-running"
        app.home.set_sort(0)  # by name
        await pilot.pause()
        assert [r.summary.name for r in app.home.visible_rows()][0] == "bad-data-failed"
        app.home.set_sort(0)  # again: reversed
        assert [r.summary.name for r in app.home.visible_rows()][0] == "torn-corrupt"
        await pilot.press("slash")
        await pilot.press(*"corrupt")
        await pilot.pause()
        assert list(table_rows(app)) == ["torn-corrupt"]
        await pilot.press("enter")  # leaves the filter box for the table
        await pilot.press("enter")  # opens the highlighted run
        assert await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        assert app.screen.run_dir == runs["corrupt"].path
        await pilot.press("escape")
        assert await wait_until(pilot, lambda: isinstance(app.screen, HomeScreen))
        await pilot.press("escape")  # clears the filter
        await pilot.pause()
        assert len(table_rows(app)) == 5


async def test_home_is_live_new_runs_and_state_changes_appear_with_a_toast(runs, tmp_path):
    app = make_app()
    bells = []
    app.bell = lambda: bells.append(1)
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_until(pilot, lambda: app.home.loaded)
        first_load = app.home.load_count
        make_run(tmp_path / "runs", "late-arrival", state="queued", epochs=5, done_epochs=0, checkpoint=None)
        assert await wait_until(pilot, lambda: "late-arrival" in table_rows(app), timeout=4.5), \
            "a run added to the index shows up before the 5 s slow poll"
        assert app.home.load_count > first_load
        # The running run finishes: toast and bell.
        path = runs["running"].path
        status = read_status(path)
        status.state, status.ended = "finished", time.time()
        atomic_write_json(status_path(path), status.to_dict())
        assert await wait_until(pilot, lambda: table_rows(app)["shapes-running"][1].startswith("finished"),
                                timeout=4.5)
        assert await wait_until(pilot, lambda: any("shapes-running finished" in n.message
                                                   for n in app._notifications))
        assert bells


async def test_home_follows_a_running_run_epochs(runs):
    appender = Appender(runs["running"].path, first_epoch=3, epochs=20, interval=0.3, attempt=2)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_until(pilot, lambda: app.home.loaded)
        appender.start()
        try:
            assert await wait_until(pilot, lambda: int(table_rows(app)["shapes-running"][2].split("/")[0]) >= 5,
                                    timeout=6)
        finally:
            appender.stop()


async def test_home_shows_a_message_for_an_unreadable_status_file(runs):
    status_path(runs["finished"].path).write_text("{ not json")
    os.utime(status_path(runs["finished"].path))
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_until(pilot, lambda: app.home.loaded)
        rows = table_rows(app)
        assert rows["coco-finished"][1] == "interrupted"  # no readable status, no lock
        assert len(rows) == 5


async def test_a_first_run_appears_at_once_when_the_state_folder_did_not_exist(tmp_path, monkeypatch):
    home = tmp_path / "fresh-home"  # a new user: no state folder, no index, when the TUI opens
    monkeypatch.setenv("YOLOTUI_HOME", str(home))
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_until(pilot, lambda: app.home.loaded)
        assert await wait_until(pilot, lambda: app.home.load_count >= 2)  # the catch-up reading, then the slow poll
        await pilot.pause(0.3)
        made = make_run(tmp_path / "runs", "first-run", state="queued", epochs=5, done_epochs=0, checkpoint=None)
        try:
            assert await wait_until(pilot, lambda: "first-run" in table_rows(app), timeout=2.5), \
                "the first run shows up before the 5 s slow poll"
        finally:
            made.release()


async def test_a_new_run_is_not_held_back_by_another_runs_checkpoint_check(runs, tmp_path, monkeypatch):
    import yolotui.tui.home_source as home_module

    real = home_module.diagnose
    slow = {"on": False}

    def slow_diagnose(path, total_epochs=None):
        if slow["on"]:
            time.sleep(4.0)  # a multi-GB last.pt on a loaded machine: read and hashed in full
        return real(path, total_epochs)

    monkeypatch.setattr(home_module, "diagnose", slow_diagnose)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_until(pilot, lambda: app.home.loaded)
        slow["on"] = True
        last = runs["running"].path / "weights" / "last.pt"
        with open(last, "ab") as handle:  # the running run writes a new checkpoint ...
            handle.write(b"\0")
        made = make_run(tmp_path / "runs", "late-arrival", state="queued", epochs=5, done_epochs=0,
                        checkpoint=None)  # ... as another run is launched
        try:
            assert await wait_until(pilot, lambda: "late-arrival" in table_rows(app), timeout=3.0), \
                "a new run is shown before the other run's checkpoint verdict is made"
            assert await wait_until(pilot, lambda: table_rows(app)["shapes-running"][COLUMNS.index("checkpoint")].split()[-1] != "checking",
                                    timeout=15)
        finally:
            made.release()
