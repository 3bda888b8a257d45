"""The run commands end to end, each `yolotui` call a real subprocess: exec, ls, status, logs, stop, save."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from runs_helpers import reap_runs, wait_for  # noqa: F401  (reap_runs is an autouse fixture)
from syspkg import needs

from yolotui import procs
from yolotui.runs import index, lock
from yolotui.runs.status import effective_state, read_status

PY = sys.executable


def cli(yolotui_cmd, cli_env, *args, cwd=None, timeout=60):
    return subprocess.run([*yolotui_cmd, *args], env=cli_env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def exec_run(yolotui_cmd, cli_env, project: Path, name: str, *command: str, cwd=None) -> Path:
    proc = cli(yolotui_cmd, cli_env, "exec", "--project", str(project), "--name", name, "--", *command, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    run_dir = Path(proc.stdout.splitlines()[0])
    assert run_dir.is_dir()
    return run_dir


def wait_running(run_dir: Path) -> int:
    wait_for(lambda: effective_state(run_dir) == "running", timeout=15)
    return wait_for(lambda: read_status(run_dir).trainer_pid)


def test_exec_returns_at_once_and_ls_finds_the_run_from_anywhere(tmp_path, yolotui_cmd, cli_env):
    work = tmp_path / "work"
    work.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    started = time.monotonic()
    first = exec_run(yolotui_cmd, cli_env, Path("runs/exec"), "exp", "sleep", "100", cwd=work)
    assert time.monotonic() - started < 20  # returned without waiting for `sleep 100`
    second = exec_run(yolotui_cmd, cli_env, Path("runs/exec"), "exp", "true", cwd=work)
    assert first == (work / "runs" / "exec" / "exp").resolve()
    assert second.name == "exp2"
    wait_running(first)
    listing = json.loads(cli(yolotui_cmd, cli_env, "ls", "--json", cwd=elsewhere).stdout)
    states = {row["name"]: row["state"] for row in listing}
    assert states["exp"] == "running"
    table = cli(yolotui_cmd, cli_env, "ls", cwd=elsewhere).stdout
    assert table.splitlines()[0].split() == ["NAME", "STATE", "EPOCH", "mAP50-95", "CKPT", "DEVICE", "STARTED"]
    assert any(line.split()[:2] == ["exp", "running"] for line in table.splitlines())


def test_default_project_and_name(tmp_path, yolotui_cmd, cli_env):
    proc = cli(yolotui_cmd, cli_env, "exec", "--", "true", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert Path(proc.stdout.strip()) == (tmp_path / "runs" / "exec" / "exp").resolve()
    assert "yolotui logs exp" in proc.stderr


def test_stop_ends_the_run_and_leaves_no_process(tmp_path, yolotui_cmd, cli_env):
    code = "import subprocess, time; subprocess.Popen(['sleep', '100']); time.sleep(100)"
    run_dir = exec_run(yolotui_cmd, cli_env, tmp_path / "proj", "job", PY, "-c", code)
    pgid = wait_running(run_dir)
    wait_for(lambda: len(procs.group_members(pgid)) == 2)
    supervisor = read_status(run_dir).supervisor_pid
    proc = cli(yolotui_cmd, cli_env, "stop", "job", "--grace", "10")
    assert proc.returncode == 0, proc.stderr
    assert "run job stopped" in proc.stdout and "SIGTERM to process group" in proc.stdout
    assert read_status(run_dir).state == "stopped"
    assert procs.group_members(pgid) == []
    wait_for(lambda: not procs.is_alive(supervisor), timeout=5)
    assert not lock.is_held(run_dir)
    status = json.loads(cli(yolotui_cmd, cli_env, "status", "job", "--json").stdout)
    assert status["state"] == "stopped" and status["failure_class"] is None

    again = cli(yolotui_cmd, cli_env, "stop", "job")
    assert again.returncode == 0 and "not running (stopped); nothing to stop" in again.stdout


def test_kill_9_of_the_supervisor_shows_interrupted(tmp_path, yolotui_cmd, cli_env):
    run_dir = exec_run(yolotui_cmd, cli_env, tmp_path / "proj", "job", "sleep", "100")
    wait_running(run_dir)
    os.kill(read_status(run_dir).supervisor_pid, signal.SIGKILL)
    proc = cli(yolotui_cmd, cli_env, "status", "job", "--json")
    data = json.loads(proc.stdout)
    assert data["state"] == "interrupted" and data["recorded_state"] == "running"
    text = cli(yolotui_cmd, cli_env, "status", str(run_dir)).stdout
    assert "state      interrupted" in text and "supervisor is gone" in text
    listing = json.loads(cli(yolotui_cmd, cli_env, "ls", "--json").stdout)
    assert listing[0]["state"] == "interrupted"


def test_logs_prints_and_follows_until_the_run_ends(tmp_path, yolotui_cmd, cli_env):
    code = "import time\nfor i in range(5):\n    print('line', i, flush=True)\n    time.sleep(0.2)\n"
    run_dir = exec_run(yolotui_cmd, cli_env, tmp_path / "proj", "job", PY, "-c", code)
    followed = cli(yolotui_cmd, cli_env, "logs", "job", "--follow", timeout=60)
    assert followed.returncode == 0
    assert [f"line {i}" for i in range(5)] == [ln for ln in followed.stdout.splitlines() if ln.startswith("line")]
    assert "is finished" in followed.stderr
    assert effective_state(run_dir) == "finished"
    tail = cli(yolotui_cmd, cli_env, "logs", "job", "--tail", "1")
    assert tail.stdout.startswith("===== yolotui: attempt 1 ended") and len(tail.stdout.splitlines()) == 1


def test_save_refuses_a_plain_exec_command(tmp_path, yolotui_cmd, cli_env):
    run_dir = exec_run(yolotui_cmd, cli_env, tmp_path / "proj", "job", "sleep", "100")
    pid = wait_running(run_dir)
    proc = cli(yolotui_cmd, cli_env, "save", "job")
    assert proc.returncode == 1 and "SIGUSR1" in proc.stderr
    assert procs.is_alive(pid)


def test_bad_input_gets_one_line_errors_and_starts_nothing(tmp_path, yolotui_cmd, cli_env):
    exec_run(yolotui_cmd, cli_env, tmp_path / "proj", "yolov9-small", "true")
    unknown = cli(yolotui_cmd, cli_env, "status", "yolov9-smal")
    assert unknown.returncode == 2
    assert unknown.stderr.strip() == "yolotui: error: unknown run 'yolov9-smal'; did you mean yolov9-small?"

    for name, reason in (("a/b", "path separator"), ("..", "'..'"), ("x\x07y", "control characters")):
        proc = cli(yolotui_cmd, cli_env, "exec", "--project", str(tmp_path / "p2"), "--name", name, "--", "true")
        assert proc.returncode == 2 and reason in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert not (tmp_path / "p2").exists()

    project = "/proc/yolotui-project" if os.geteuid() == 0 else str(tmp_path / "ro" / "proj")
    if os.geteuid() != 0:
        (tmp_path / "ro").mkdir(mode=0o555)
    before = len(index.entries())
    proc = cli(yolotui_cmd, cli_env, "exec", "--project", project, "--", "sleep", "100")
    assert proc.returncode == 2 and "not writable" in proc.stderr
    assert len(index.entries()) == before

    missing = cli(yolotui_cmd, cli_env, "exec", "--project", str(tmp_path / "p3"), "--", "no-such-prog-xyz")
    assert missing.returncode == 2 and "not found on PATH" in missing.stderr
    assert not (tmp_path / "p3").exists()
    empty = cli(yolotui_cmd, cli_env, "exec", "--project", str(tmp_path / "p3"))
    assert empty.returncode == 2 and "no command given" in empty.stderr


def tmux(sock: str, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["tmux", "-L", sock, "-f", "/dev/null", *args], env=env, capture_output=True,
                          text=True, timeout=30)


@pytest.mark.tmux
@needs("tmux")
def test_run_survives_the_terminal_hanging_up(tmp_path, yolotui_cmd, cli_env):
    """A run started in a tmux shell keeps going after the tmux server (terminal and shell) is killed."""
    out = tmp_path / "out.txt"
    control = tmp_path / "control.txt"  # the same loop as a plain background job of the shell: it must die
    project = tmp_path / "proj"

    def loop(path: Path) -> str:
        return (f"import itertools, time; [(open({str(path)!r}, 'a').write('x\\n'), time.sleep(0.2)) "
                "for _ in itertools.count()]")

    line = (shlex.join([PY, "-c", loop(control)]) + " & "
            + shlex.join([*yolotui_cmd, "exec", "--project", str(project), "--name", "hup", "--", PY, "-c",
                          loop(out)]))
    env = {**cli_env, "TERM": "xterm-256color"}
    env.pop("TMUX", None)
    sock = f"yolotui-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    run_dir = project / "hup"
    try:
        assert tmux(sock, env, "new-session", "-d", "-s", "t", "-x", "120", "-y", "30",
                    "bash", "--norc", "--noprofile").returncode == 0
        server_pid = int(tmux(sock, env, "display-message", "-p", "-t", "t", "#{pid}").stdout.strip())
        tmux(sock, env, "send-keys", "-t", "t", "-l", line + "; sleep 1000")
        tmux(sock, env, "send-keys", "-t", "t", "Enter")
        wait_for(lambda: (run_dir / "status.json").exists() and effective_state(run_dir) == "running", timeout=30)
        wait_for(lambda: out.exists() and out.stat().st_size > 0, timeout=15)
        wait_for(lambda: control.exists() and control.stat().st_size > 0, timeout=15)

        tmux(sock, env, "kill-server")
        wait_for(lambda: not procs.is_alive(server_pid), timeout=10)
        time.sleep(0.3)
        size_after_hangup = len(out.read_text().splitlines())
        control_after_hangup = len(control.read_text().splitlines())
        time.sleep(2.5)
        grown = len(out.read_text().splitlines()) - size_after_hangup
        assert grown >= 5, f"the command stopped writing after the hangup ({grown} new lines in 2.5 s)"
        # the hangup was real: the shell's own background job got SIGHUP and stopped writing
        assert len(control.read_text().splitlines()) - control_after_hangup <= 1

        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        listing = json.loads(cli(yolotui_cmd, cli_env, "ls", "--json", cwd=elsewhere).stdout)
        assert [row["state"] for row in listing if row["path"] == str(run_dir.resolve())] == ["running"]
    finally:
        tmux(sock, env, "kill-server")
        for entry in Path("/proc").iterdir():  # the control loop, should the hangup not have ended it
            if entry.name.isdigit() and str(control) in " ".join(procs.cmdline(int(entry.name))):
                os.kill(int(entry.name), signal.SIGKILL)
        if (run_dir / "status.json").exists():
            cli(yolotui_cmd, cli_env, "stop", str(run_dir), "--force")
