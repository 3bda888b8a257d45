"""The home screen with hosts, against a real sshd acting as two hosts (tests/fleetkit.py): remote runs tagged
HOST:NAME next to the local ones, each host's reachability on one line, an unreachable host that never holds up
the table, x on a remote row stopping the run through the remote CLI (R and F name the host's wizards), and a host that drops (sshd gone) coming
back by itself once sshd is back."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import psutil
import pytest
from fleetkit import start_fleet
from tui_fakes import FakeSampler, rendered, wait_until
from tui_fixtures import FIXED_NOW, make_run

from yolotui.tui.app import YolotuiApp

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def fleet(tmp_path, monkeypatch):
    made = start_fleet(tmp_path / "fleet")
    for key in ("YOLOTUI_HOME", "YOLOTUI_SSH_CONFIG", "XDG_RUNTIME_DIR"):
        monkeypatch.setenv(key, made.env[key])
    yield made
    made.stop()


def cli(fleet, *args):
    done = subprocess.run([sys.executable, "-m", "yolotui", *args], env=fleet.env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def table_rows(app) -> dict[str, list[str]]:
    table = app.home.query_one("#runs")
    return {str(table.get_row_at(i)[0]): [str(c) for c in table.get_row_at(i)] for i in range(table.row_count)}


def hosts_line(app) -> str:
    found = app.home.query("#hosts-line")
    return rendered(found.first()) if found else ""


def restart_sshd(fleet) -> None:
    fleet.sshd.process = subprocess.Popen(fleet.sshd.process.args, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)


def take_down(fleet) -> None:
    """sshd and every connection it holds gone (frozen first, so no new one slips in meanwhile)."""
    listener = psutil.Process(fleet.sshd.process.pid)
    listener.send_signal(signal.SIGSTOP)
    for child in listener.children(recursive=True):
        try:
            child.send_signal(signal.SIGKILL)
        except psutil.Error:
            pass
    listener.send_signal(signal.SIGKILL)
    fleet.sshd.process.wait(timeout=10)


async def test_home_shows_every_hosts_runs_and_stops_a_remote_run(fleet, tmp_path):
    cli(fleet, "hosts", "add", "dead", "--no-check")
    local = make_run(tmp_path / "local-runs", "here", state="finished")
    cli(fleet, "exec", "--host", "hostb", "--name", "far", "--project", str(tmp_path / "b-runs"), "--",
        sys.executable, "-c", "import time; time.sleep(60)")
    app = YolotuiApp(sampler=FakeSampler(), clock=lambda: FIXED_NOW, gpu_interval=None)
    async with app.run_test(size=(140, 40)) as pilot:
        assert await wait_until(pilot, lambda: "hostb:far" in table_rows(app), timeout=60)
        rows = table_rows(app)
        assert rows["hostb:far"][1] == "running" and rows["here"][1] == "finished"  # local and remote together
        assert await wait_until(pilot, lambda: "dead unreachable since" in hosts_line(app), timeout=60)
        assert "retrying" in hosts_line(app) and "local ok" in hosts_line(app)
        assert await wait_until(pilot, lambda: "hostb ok (no GPU)" in hosts_line(app), timeout=60)  # its GPU strip
        table = app.home.query_one("#runs")
        table.move_cursor(row=table.get_row_index("ssh://hostb/far"))
        await pilot.press("enter")  # a remote dashboard needs the real terminal (ssh -t); headless, it says how
        assert await wait_until(pilot, lambda: any("yolotui attach hostb:far" in str(n.message)
                                                   for n in app._notifications))
        assert app.screen is app.home
        await pilot.press("x")  # asks first
        await pilot.pause(0.2)
        assert json.loads(cli(fleet, "status", "hostb:far", "--json").stdout)["state"] == "running"
        await pilot.press("x")
        assert await wait_until(pilot, lambda: table_rows(app).get("hostb:far", ["", ""])[1] == "stopped",
                                timeout=60)
        for key, wizard in (("R", "resume"), ("F", "finetune")):  # the host's own wizard needs the real terminal
            await pilot.press(key)
            assert await wait_until(pilot, lambda: any(f"yolotui attach hostb:far --wizard {wizard}" in str(
                n.message) for n in app._notifications))
            assert app.screen is app.home
        cli(fleet, "resume", "hostb:far")  # an exec run reruns its command; the row follows
        assert await wait_until(pilot, lambda: table_rows(app).get("hostb:far", ["", ""])[1] == "running",
                                timeout=60)
        cli(fleet, "stop", "hostb:far")
    local.release()


async def test_a_host_that_drops_is_shown_unreachable_and_comes_back_by_itself(fleet, tmp_path):
    cli(fleet, "exec", "--host", "hosta", "--name", "steady", "--project", str(tmp_path / "a-runs"), "--",
        sys.executable, "-c", "pass")
    app = YolotuiApp(sampler=FakeSampler(), clock=lambda: FIXED_NOW, gpu_interval=None)
    async with app.run_test(size=(140, 40)) as pilot:
        assert await wait_until(pilot, lambda: "hosta:steady" in table_rows(app), timeout=60)
        take_down(fleet)
        assert await wait_until(pilot, lambda: "hosta unreachable since" in hosts_line(app), timeout=60)
        assert "hosta:steady" in table_rows(app)  # its last reading stays in view
        restart_sshd(fleet)
        assert await wait_until(pilot, lambda: "hosta ok" in hosts_line(app), timeout=90)
        assert "hosta:steady" in table_rows(app)


async def test_the_new_run_wizard_starts_a_run_on_a_chosen_host(tmp_path):
    from textual.widgets import Input, Static
    from wizard_kit import CaptureLauncher, HostApp

    from yolotui.fleet.hosts import add_host
    from yolotui.tui.screens.wizard_new_run import NewRunWizard

    add_host("gpu1", "gpu1")
    launcher = CaptureLauncher(tmp_path / "elsewhere")
    app = HostApp(lambda: NewRunWizard(launcher, sampler=FakeSampler(),
                                       values={"data": "/only/on/gpu1/data.yaml", "host": "nohost"}))
    async with app.run_test(size=(100, 40)) as pilot:
        wizard = app.wizard
        assert await wait_until(pilot, lambda: wizard.gpu_indices is not None)
        await pilot.press("ctrl+s")
        assert await wait_until(pilot, lambda: "no host called 'nohost'" in rendered(
            wizard.query_one("#host-error", Static)))
        assert launcher.calls == []
        wizard.query_one("#host", Input).value = "gpu1"  # the data.yaml is the host's: not checked here
        await pilot.press("ctrl+s")
        assert await wait_until(pilot, lambda: app.results)
    [args] = launcher.calls
    assert args[0] == "train" and args[-2:] == ["--host", "gpu1"]
    assert args[args.index("--data") + 1] == "/only/on/gpu1/data.yaml"
    assert app.results == [None]  # nothing to open here: the runs table shows gpu1's run
