"""The fleet against a real sshd on 127.0.0.1 acting as two hosts (tests/fleetkit.py): a run started on hostb
from here, watched live, stopped and resumed; the link cut mid-watch and the stream coming back by itself;
hostile run names that stay data; unreachable hosts (nothing listening; a port that never answers) that never
hold up the others. The trainer is the official stand-in (tests/official_standin): an epoch is a few batches."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest
from fleetkit import start_fleet
from runs_helpers import wait_for
from syspkg import needs

STANDIN = Path(__file__).resolve().parent / "official_standin"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    made = start_fleet(tmp_path_factory.mktemp("fleet"), extra_env={"STANDIN_BATCH_S": "0.25"})
    yield made
    made.stop()


def yolotui(fleet, *args, timeout=120, check=True):
    done = subprocess.run([sys.executable, "-m", "yolotui", *args], env=fleet.env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def remote_state(fleet, host, run):
    done = yolotui(fleet, "status", f"{host}:{run}", "--json", check=False)
    return json.loads(done.stdout)["state"] if done.returncode == 0 else None


def kill_ssh_connections(fleet) -> int:
    """Cut every link: kill sshd's per-connection processes (the listener stays)."""
    killed = 0
    for child in psutil.Process(fleet.sshd.process.pid).children(recursive=False):
        try:
            child.send_signal(signal.SIGKILL)
            killed += 1
        except psutil.Error:
            pass
    return killed


def test_hosts_ls_names_each_host_its_version_and_gpus(fleet):
    done = yolotui(fleet, "hosts", "ls", "--json")
    hosts = {h["name"]: h for h in json.loads(done.stdout)}
    assert set(hosts) == {"local", "hosta", "hostb"}
    from yolotui import __version__

    for name in ("hosta", "hostb"):
        assert hosts[name]["reachable"], hosts[name]["error"]
        assert hosts[name]["version"] == __version__ and hosts[name]["compat"] == ""
        assert hosts[name]["gpus"] or hosts[name]["gpu_note"]  # GPUs, or why there are none


def test_a_host_without_yolotui_gets_the_install_command(fleet, tmp_path):
    env = dict(fleet.env, YOLOTUI_HOME=str(tmp_path))
    subprocess.run([sys.executable, "-m", "yolotui", "hosts", "add", "bare", "hostb", "--yolotui",
                    "no-such-yolotui-here", "--no-check"], env=env, check=True, timeout=60)
    done = subprocess.run([sys.executable, "-m", "yolotui", "hosts", "ls"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert "bare: yolotui is not installed there" in done.stderr and "pip install yolotui" in done.stderr


def test_an_older_remote_yolotui_is_named_with_what_it_lacks(fleet, tmp_path):
    env = dict(fleet.env, YOLOTUI_HOME=str(tmp_path))
    subprocess.run([sys.executable, "-m", "yolotui", "hosts", "add", "old", "hostb", "--yolotui",
                    "sh -c 'echo yolotui 0.0.9' old-yolotui"], env=env, check=True, timeout=60, capture_output=True)
    done = subprocess.run([sys.executable, "-m", "yolotui", "hosts", "ls"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert "old: remote yolotui 0.0.9 is older than this" in done.stderr
    from yolotui.fleet.probe import NEEDS

    assert "missing there: " in done.stderr and all(name in done.stderr for name in NEEDS)


def test_a_run_started_on_hostb_is_watched_stopped_and_resumed_from_here(fleet, tmp_path, monkeypatch):
    project = tmp_path / "runs on b"  # a space in the remote path: data, not two words
    started = yolotui(fleet, "train", "--host", "hostb", "--backend", "official", "--repo", str(STANDIN),
                      "--python", sys.executable, "--restart-backoff", "0", "--epochs", "40", "--batch-size", "4",
                      "--project", str(project), "--name", "r1", "--json")
    assert json.loads(started.stdout.strip().splitlines()[-1])["name"] == "r1"
    assert (project / "r1").is_dir() and not (fleet.homes["local"] / "runs.jsonl").exists()  # it lives on b
    listed = yolotui(fleet, "ls", "--all-hosts", "--json")
    assert [(r["host"], r["name"]) for r in json.loads(listed.stdout)] == [("hostb", "r1")]

    from yolotui.fleet.hosts import find_host
    from yolotui.fleet.stream import follow

    for key in ("YOLOTUI_SSH_CONFIG", "XDG_RUNTIME_DIR", "YOLOTUI_HOME"):
        monkeypatch.setenv(key, fleet.env[key])
    seen = []
    for item in follow(find_host("hostb"), "r1"):  # watched live: until its first checkpoint
        seen.append(item)
        if item.get("type") == "checkpoint":
            break
    assert seen[0]["type"] == "status" and seen[0]["name"] == "r1"

    stopped = yolotui(fleet, "stop", "hostb:r1", "--grace", "60")
    assert "r1" in stopped.stdout
    assert wait_for(lambda: remote_state(fleet, "hostb", "r1") == "stopped", timeout=60)
    yolotui(fleet, "resume", "hostb:r1", "--json")

    def starts():
        events = [json.loads(x) for x in (project / "r1" / "events.jsonl").read_text().splitlines() if x.strip()]
        return [e for e in events if e["type"] == "start"]

    assert wait_for(lambda: len(starts()) == 2, timeout=90)  # the trainer started again ...
    assert starts()[-1]["resumed_from"]["epoch"] >= 0  # ... from its checkpoint
    assert remote_state(fleet, "hostb", "r1") in ("running", "finished")
    yolotui(fleet, "stop", "r1", "--host", "hostb", "--grace", "60")
    assert wait_for(lambda: remote_state(fleet, "hostb", "r1") == "stopped", timeout=60)


def test_cutting_the_link_mid_watch_never_loses_the_run_and_the_stream_comes_back(fleet, tmp_path):
    project = tmp_path / "runs"
    yolotui(fleet, "exec", "--host", "hostb", "--name", "cut", "--project", str(project), "--", sys.executable,
            "-c", "import time; time.sleep(25)")
    watch = subprocess.Popen([sys.executable, "-m", "yolotui", "watch", "hostb:cut", "--json"], env=fleet.env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    lines: list[dict] = []
    reader = threading.Thread(target=lambda: lines.extend(json.loads(x) for x in watch.stdout), daemon=True)
    reader.start()
    try:
        wait_for(lambda: any(x["type"] == "status" for x in lines), timeout=60)
        assert kill_ssh_connections(fleet) >= 1
        wait_for(lambda: any(x.get("type") == "link" and x.get("state") == "lost" for x in lines), timeout=60)
        wait_for(lambda: any(x.get("type") == "link" and x.get("state") == "back" for x in lines), timeout=60)
        assert remote_state(fleet, "hostb", "cut") == "running"  # the run never noticed
        yolotui(fleet, "stop", "hostb:cut")
        assert watch.wait(timeout=60) == 0
        reader.join(timeout=10)
        assert lines[-1]["type"] == "end" and lines[-1]["state"] == "stopped"
        back = [i for i, x in enumerate(lines) if x.get("state") == "back"][0]
        assert lines[back + 1]["type"] == "status"  # the view starts again from the run's status
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait(timeout=10)


HOSTILE = ["a;touch PWNED", "b'; touch PWNED; echo '", 'c"$(touch PWNED)"', "d `touch PWNED`", "e && touch PWNED"]


@pytest.mark.parametrize("command", ["stop", "status", "resume", "save", "logs", "doctor", "watch"])
def test_hostile_run_names_are_data_on_the_remote_side(fleet, command):
    """Each name reaches the remote yolotui whole (it names it back as an unknown run); nothing is executed."""
    home = Path.home()
    assert not (home / "PWNED").exists()
    for name in HOSTILE:
        done = yolotui(fleet, command, f"hostb:{name}", check=False, timeout=60)
        assert done.returncode not in (0, 255), done.stderr
        said = done.stderr if command != "watch" else done.stdout  # watch relays the remote error as a line
        assert f"unknown run {name!r}" in said or f"unknown run {json.dumps(name)}" in said, said
        assert not (home / "PWNED").exists() and not Path("PWNED").exists()


def test_a_run_folder_path_with_quotes_and_semicolons_is_used_as_given(fleet, tmp_path):
    project = tmp_path / "it's; touch PWNED"
    yolotui(fleet, "exec", "--host", "hostb", "--name", "odd", "--project", str(project), "--", sys.executable,
            "-c", "pass")
    assert (project / "odd").is_dir() and not (Path.home() / "PWNED").exists()
    state = wait_for(lambda: remote_state(fleet, "hostb", str(project / "odd")) == "finished", timeout=60)
    assert state


@pytest.fixture
def silent_port():
    """A port that accepts connections and never says a word (a hung host)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield server.getsockname()[1]
    server.close()


def test_unreachable_hosts_never_hold_up_the_others(fleet, tmp_path, silent_port):
    env = dict(fleet.env, YOLOTUI_HOME=str(tmp_path / "laptop"))
    config = Path(fleet.env["YOLOTUI_SSH_CONFIG"]).read_text()
    silent_config = tmp_path / "ssh_config"
    silent_config.write_text(config + f"\nHost silent\n  HostName 127.0.0.1\n  Port {silent_port}\n")
    env["YOLOTUI_SSH_CONFIG"] = str(silent_config)
    settings = Path(fleet.env["YOLOTUI_HOME"]) / "config" / "settings.yaml"
    (tmp_path / "laptop" / "config").mkdir(parents=True)
    (tmp_path / "laptop" / "config" / "settings.yaml").write_text(settings.read_text())
    for name in ("dead", "silent"):
        subprocess.run([sys.executable, "-m", "yolotui", "hosts", "add", name, "--no-check"], env=env, check=True,
                       timeout=60)
    subprocess.run([sys.executable, "-m", "yolotui", "exec", "--host", "hosta", "--name", "alive", "--project",
                    str(tmp_path / "runs"), "--", sys.executable, "-c", "pass"], env=env, check=True, timeout=60)
    done = subprocess.run([sys.executable, "-m", "yolotui", "ls", "--all-hosts"], env=env, capture_output=True,
                          text=True, timeout=120)  # bounded: the silent host's ssh gives up (ConnectTimeout)
    assert done.returncode == 0, done.stderr
    assert "hosta  alive" in done.stdout
    assert "dead: unreachable since " in done.stderr and "silent: unreachable since " in done.stderr
    hosts = subprocess.run([sys.executable, "-m", "yolotui", "hosts", "ls", "--timeout", "3"], env=env,
                           capture_output=True, text=True, timeout=120)
    rows = {line.split()[0]: line.split()[2] for line in hosts.stdout.splitlines()[1:]}
    assert rows == {"local": "yes", "dead": "NO", "hosta": "yes", "hostb": "yes", "silent": "NO"}


def test_stop_on_an_unreachable_host_says_so_and_runs_nothing(fleet, tmp_path):
    env = dict(fleet.env, YOLOTUI_HOME=str(tmp_path))
    subprocess.run([sys.executable, "-m", "yolotui", "hosts", "add", "dead", "--no-check"], env=env, check=True,
                   timeout=60)
    done = subprocess.run([sys.executable, "-m", "yolotui", "stop", "dead:r1"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 255 and "dead (dead) unreachable over ssh; nothing was run there" in done.stderr


class Pane:
    """`yolotui ARGS` in a 120x30 pane of a private tmux server (its own -L socket) with the fleet's environment;
    what the command exits with is printed as `EXIT=N`, and the pane stays."""

    def __init__(self, fleet, *args: str) -> None:
        self.fleet = fleet
        self.tmux = ["tmux", "-L", f"yolotui-fleet-{os.getpid()}", "-f", "/dev/null"]
        env_args = [a for k in ("PYTHONPATH", "YOLOTUI_HOME", "YOLOTUI_SSH_CONFIG", "XDG_RUNTIME_DIR")
                    for a in ("-e", f"{k}={fleet.env[k]}")]
        script = f"{shlex.join([sys.executable, '-m', 'yolotui', *args])}; echo EXIT=$?; sleep 60"
        subprocess.run([*self.tmux, "new-session", "-d", "-x", "120", "-y", "30", "-s", "t", *env_args, "sh", "-c",
                        script], check=True, timeout=20)

    def screen(self) -> str:
        """The pane's text now."""
        return subprocess.run([*self.tmux, "capture-pane", "-p", "-J", "-t", "t"], capture_output=True, text=True,
                              timeout=20).stdout

    def keys(self, *keys: str) -> None:
        """Type `keys` (tmux key names)."""
        subprocess.run([*self.tmux, "send-keys", "-t", "t", *keys], check=True, timeout=20)

    def until(self, condition, timeout: float) -> None:
        """Wait for `condition`; on a timeout, fail showing the pane and the end of the TUI's log."""
        try:
            wait_for(condition, timeout=timeout)
        except AssertionError as exc:
            tui_log = Path(self.fleet.env["YOLOTUI_HOME"]) / "tui.log"
            tail = tui_log.read_text(errors="replace")[-2000:] if tui_log.exists() else "(none)"
            raise AssertionError(f"{exc}; the pane:\n{self.screen()}\ntui.log:\n{tail}") from None

    def close(self) -> None:
        """Stop the tmux server and what runs in it."""
        subprocess.run([*self.tmux, "kill-server"], capture_output=True, timeout=20)


def stopped_exec_run(fleet, tmp_path, name: str, stop: bool = True) -> None:
    """An exec run on hostb (a sleep), stopped unless `stop` is False."""
    yolotui(fleet, "exec", "--host", "hostb", "--name", name, "--project", str(tmp_path / "runs"), "--",
            sys.executable, "-c", "import time; time.sleep(60)")
    if stop:
        yolotui(fleet, "stop", f"hostb:{name}")


@needs("tmux")
def test_attach_host_run_opens_the_remote_dashboard_and_a_cut_link_leaves_the_run_running(fleet, tmp_path):
    stopped_exec_run(fleet, tmp_path, "dash", stop=False)
    pane = Pane(fleet, "attach", "hostb:dash")
    try:
        pane.until(lambda: "dash" in pane.screen() and "running" in pane.screen(), 90)  # the remote dashboard
        kill_ssh_connections(fleet)
        pane.until(lambda: "EXIT=255" in pane.screen(), 60)
        assert "the run goes on there: attach again with `yolotui attach hostb:dash`" in pane.screen()
        assert "Resume" not in pane.screen()  # the dead dashboard's screen was cleared (alternate screen left)
        assert remote_state(fleet, "hostb", "dash") == "running"
        yolotui(fleet, "stop", "hostb:dash")
    finally:
        pane.close()


@needs("tmux")
def test_a_remote_runs_resume_wizard_runs_on_its_host_and_resumes_it(fleet, tmp_path):
    """R on a remote row opens `yolotui attach RUN --wizard resume` on the host over ssh -t: the host's own wizard,
    reading its checkpoints there; its launch resumes the run there and shows the resumed run's dashboard."""
    stopped_exec_run(fleet, tmp_path, "wiz")
    pane = Pane(fleet, "attach", "hostb:wiz", "--wizard", "resume")
    try:
        # drawn: the wizard's frame on line 1 (a modal over the host's runs table) and the exec backend's choice
        pane.until(lambda: "╭─ resume" in pane.screen().partition("\n")[0]
                   and "run its command again" in pane.screen(), 90)
        assert remote_state(fleet, "hostb", "wiz") == "stopped"
        pane.keys("C-s")
        pane.until(lambda: remote_state(fleet, "hostb", "wiz") == "running", 90)
        pane.until(lambda: pane.screen().lstrip().startswith("wiz") and "running" in pane.screen().splitlines()[0],
                   60)  # the resumed run's dashboard, drawn on the host
        pane.keys("q")
        pane.until(lambda: "EXIT=0" in pane.screen(), 60)
        assert remote_state(fleet, "hostb", "wiz") == "running"  # quitting the dashboard left the run going
    finally:
        pane.close()
        yolotui(fleet, "stop", "hostb:wiz", check=False)


@needs("tmux")
def test_r_on_a_remote_row_hands_the_real_terminal_to_the_hosts_wizard(fleet, tmp_path):
    """The TUI suspends and gives `ssh -t` the terminal itself (its stdout and stderr otherwise go to tui.log):
    the host's wizard is drawn on the screen, and closing it brings the home screen back."""
    stopped_exec_run(fleet, tmp_path, "far")
    pane = Pane(fleet)
    try:
        pane.until(lambda: "hostb:far" in pane.screen() and "stopped" in pane.screen(), 90)  # home, the remote row
        pane.keys("R")
        pane.until(lambda: "╭─ resume" in pane.screen() and "run its command again" in pane.screen(), 90)
        pane.keys("Escape")
        pane.until(lambda: "╭─ resume" not in pane.screen() and "hostb:far" in pane.screen(), 60)  # back home
        pane.keys("q")
        pane.until(lambda: "EXIT=0" in pane.screen(), 60)
    finally:
        pane.close()
