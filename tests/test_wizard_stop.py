"""Stop confirmation (Pilot, fake run state and clock): graceful stop, force offered only after the grace period,
cancel runs nothing, a run that is not live offers nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from textual.widgets import Static
from tui_fakes import rendered, wait_until
from wizard_kit import CaptureLauncher, HostApp, make_plain_run

from yolotui.runs.status import effective_state, read_status
from yolotui.tui.actions import cli_argv, cli_env
from yolotui.tui.screens.confirm_stop import ConfirmStopScreen

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


class FakeRun:
    """The run's state and a clock the test moves."""

    def __init__(self, state="running"):
        self.state = state
        self.now = 1000.0

    def read(self, run_dir):
        return self.state

    def clock(self):
        return self.now


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return make_plain_run(tmp_path / "runs" / "exp")


def host(run_dir, fake, launcher):
    return HostApp(lambda: ConfirmStopScreen(run_dir, launcher, grace_s=30, poll_s=0.02, state_reader=fake.read,
                                             clock=fake.clock))


def bindings(screen) -> set[str]:
    return {b.binding.action for b in screen.active_bindings.values() if b.enabled}


async def test_graceful_stop_then_force_after_the_grace_period(run_dir):
    fake, launcher = FakeRun(), CaptureLauncher()
    app = host(run_dir, fake, launcher)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.wizard
        await pilot.pause()
        assert "Stop run exp?" in rendered(screen.query_one("#question", Static))
        assert "yolotui stop runs/exp --grace 30 --no-wait" in rendered(screen.query_one("#command", Static))
        await pilot.press("f")  # force is not offered yet
        await pilot.pause(0.05)
        assert launcher.calls == []
        await pilot.press("enter")
        assert await wait_until(pilot, lambda: launcher.calls == [["stop", "runs/exp", "--grace", "30", "--no-wait"]])
        assert await wait_until(pilot, lambda: "waiting for the checkpoint" in
                                rendered(screen.query_one("#status", Static)))
        await pilot.press("f")
        await pilot.pause(0.05)
        assert len(launcher.calls) == 1 and not screen.force_offered
        fake.now += 31  # the grace period is over and the run is still live
        assert await wait_until(pilot, lambda: screen.force_offered)
        assert "press f to force" in rendered(screen.query_one("#status", Static))
        assert "yolotui stop runs/exp --force --no-wait" in rendered(screen.query_one("#command", Static))
        await pilot.press("f")
        assert await wait_until(pilot, lambda: len(launcher.calls) == 2)
        assert launcher.calls[1] == ["stop", "runs/exp", "--force", "--no-wait"]
        fake.state = "stopped"
        assert await wait_until(pilot, lambda: app.results == ["stopped"])


async def test_stop_ends_within_the_grace_period(run_dir):
    fake, launcher = FakeRun(), CaptureLauncher()
    app = host(run_dir, fake, launcher)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("y")
        assert await wait_until(pilot, lambda: launcher.calls)
        fake.state = "stopped"
        assert await wait_until(pilot, lambda: app.results == ["stopped"])
    assert len(launcher.calls) == 1


async def test_cancel_runs_nothing(run_dir):
    fake, launcher = FakeRun(), CaptureLauncher()
    app = host(run_dir, fake, launcher)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("n")
        assert await wait_until(pilot, lambda: app.results == [None])
    assert launcher.calls == []


async def test_not_running_offers_nothing(run_dir):
    fake, launcher = FakeRun("finished"), CaptureLauncher()
    app = host(run_dir, fake, launcher)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.wizard
        await pilot.pause()
        assert "not running (finished)" in rendered(screen.query_one("#question", Static))
        assert "confirm" not in bindings(screen)
        await pilot.press("enter", "f")
        await pilot.pause(0.05)
    assert launcher.calls == []


async def test_a_failed_request_is_shown(run_dir):
    fake, launcher = FakeRun(), CaptureLauncher(error="run exp is not running")
    app = host(run_dir, fake, launcher)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.wizard
        await pilot.pause()
        await pilot.press("enter")
        assert await wait_until(pilot, lambda: "failed: run exp is not running" in
                                rendered(screen.query_one("#status", Static)))
        assert screen.phase == "confirm"  # may be tried again


async def test_real_stop_of_a_supervised_command(tmp_path, monkeypatch):
    """Through the real CLI: `yolotui exec -- sleep` is running; confirming runs `yolotui stop ... --no-wait`, the
    screen follows the real state until the run is stopped."""
    monkeypatch.chdir(tmp_path)
    started = subprocess.run(cli_argv(["exec", "--name", "sleeper", "--", sys.executable, "-c",
                                       "import time; time.sleep(120)"]), env=cli_env(), capture_output=True,
                             text=True, timeout=60)
    assert started.returncode == 0, started.stderr
    run_dir = Path(started.stdout.strip().splitlines()[0]).resolve()
    try:
        app = HostApp(lambda: ConfirmStopScreen(run_dir, grace_s=10, poll_s=0.1))
        async with app.run_test(size=(80, 24)) as pilot:
            assert await wait_until(pilot, lambda: effective_state(run_dir) == "running", timeout=30)
            await pilot.pause(0.1)
            await pilot.press("enter")
            assert await wait_until(pilot, lambda: app.results, timeout=40)
        assert app.results == ["stopped"]
        assert app.wizard.launched == [["stop", "runs/exec/sleeper", "--grace", "10", "--no-wait"]]
    finally:
        status = read_status(run_dir)
        for pid in (status.trainer_pid, status.supervisor_pid) if status else ():
            try:
                if pid:
                    os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
