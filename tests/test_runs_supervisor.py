"""The launcher, the detached supervisor and control, driven through the library API."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runs_helpers import reap_runs, wait_for  # noqa: F401  (reap_runs is an autouse fixture)

from yolotui import procs
from yolotui.errors import UserError
from yolotui.placement.launcher import launch
from yolotui.runs import index, lock
from yolotui.runs.layout import STOP_REQUEST, TRAIN_LOG
from yolotui.runs.status import effective_state, read_status
from yolotui.runs.store import create_run_dir
from yolotui.supervisor.control import save_now, stop

PY = sys.executable


def start(tmp_path: Path, command: list[str], name: str = "exp", **kwargs) -> Path:
    run_dir = create_run_dir(tmp_path / "proj", name)
    launch(run_dir, command, name=run_dir.name, **kwargs)
    return run_dir


def state_of(run_dir: Path) -> str:
    return effective_state(run_dir)


def wait_state(run_dir: Path, *states: str, timeout: float = 15.0) -> str:
    return wait_for(lambda: state_of(run_dir) if state_of(run_dir) in states else None, timeout)


def wait_running(run_dir: Path) -> int:
    """Wait until the trainer runs; returns its pid (= its process group)."""
    wait_state(run_dir, "running")
    return wait_for(lambda: read_status(run_dir).trainer_pid)


def test_launch_returns_with_lock_held_and_run_finishes(tmp_path):
    code = "import os; print('dir', os.environ['YOLOTUI_RUN_DIR']); print('attempt', os.environ['YOLOTUI_ATTEMPT'])"
    run_dir = create_run_dir(tmp_path / "proj", "exp")
    status = launch(run_dir, [PY, "-c", code], name="exp", device="cpu")
    assert lock.is_held(run_dir) or read_status(run_dir).state == "finished"
    assert status.name == "exp"
    assert [e.path for e in index.entries()] == [str(run_dir)]
    wait_state(run_dir, "finished")
    final = read_status(run_dir)
    assert final.exit_code == 0 and final.exit_signal is None and final.failure_class is None
    assert final.supervisor_pid and final.started and final.ended >= final.started
    assert final.device == "cpu" and final.trainer_pid is None
    assert len(final.attempts) == 1
    attempt = final.attempts[0]
    for key in ("attempt", "started", "ended", "exit_code", "exit_signal", "failure_class", "message", "remedy",
                "changes"):
        assert key in attempt
    log = (run_dir / TRAIN_LOG).read_text()
    assert f"dir {run_dir}" in log and "attempt 1" in log
    assert "===== yolotui: attempt 1/1 started" in log
    wait_for(lambda: not lock.is_held(run_dir), timeout=5)  # the supervisor exits after the final write


def test_crash_is_retried_with_resume_args_until_the_limit(tmp_path):
    code = "import sys; print('argv', sys.argv[1:]); sys.exit(3)"
    run_dir = start(tmp_path, [PY, "-c", code], max_attempts=3, backoff_s=0.05, extra={"resume_args": ["--resume"]})
    wait_state(run_dir, "failed")
    final = read_status(run_dir)
    assert final.failure_class == "crash" and final.exit_code == 3
    assert [a["attempt"] for a in final.attempts] == [1, 2, 3]
    assert [a["exit_code"] for a in final.attempts] == [3, 3, 3]
    assert final.attempts[0]["command"][-1] != "--resume"
    assert final.attempts[1]["command"][-1] == "--resume"
    assert "retry 2/3" in final.attempts[0]["remedy"]
    assert "attempt limit" in final.attempts[2]["remedy"]
    assert len(final.remedies) == 2
    log = (run_dir / TRAIN_LOG).read_text()
    assert log.count("===== yolotui: attempt") == 6  # a start and an end marker per attempt
    assert "argv []" in log and "argv ['--resume']" in log


def test_kill_from_outside_is_class_killed_and_not_retried(tmp_path):
    run_dir = start(tmp_path, ["sleep", "100"], max_attempts=3, backoff_s=0.05)
    pid = wait_running(run_dir)
    os.kill(pid, signal.SIGKILL)
    wait_state(run_dir, "failed")
    final = read_status(run_dir)
    assert final.failure_class == "killed"
    assert final.exit_signal == signal.SIGKILL
    assert len(final.attempts) == 1


def test_data_error_event_is_not_retried(tmp_path):
    code = ("import os; from yolotui.runs.events import EventWriter; "
            "EventWriter(os.environ['YOLOTUI_RUN_DIR'] + '/events.jsonl', int(os.environ['YOLOTUI_ATTEMPT']))"
            ".emit('error', kind='data', message='labels/a.txt line 3: class 7 out of range'); raise SystemExit(1)")
    run_dir = start(tmp_path, [PY, "-c", code], max_attempts=3, backoff_s=0.05)
    wait_state(run_dir, "failed")
    final = read_status(run_dir)
    assert final.failure_class == "data"
    assert "labels/a.txt line 3" in final.message
    assert len(final.attempts) == 1


def test_kill_9_of_the_supervisor_reads_interrupted_and_ends_the_trainer(tmp_path):
    run_dir = start(tmp_path, ["sleep", "100"])
    trainer = wait_running(run_dir)
    supervisor = read_status(run_dir).supervisor_pid
    os.kill(supervisor, signal.SIGKILL)
    killed_at = time.monotonic()
    wait_for(lambda: state_of(run_dir) == "interrupted", timeout=5)
    assert time.monotonic() - killed_at < 1.0
    assert read_status(run_dir).state == "running"  # as written; the derived state says interrupted
    # The trainer gets SIGTERM when its supervisor dies, so an interrupted run has nothing left running.
    wait_for(lambda: not procs.group_members(trainer), timeout=5)


def test_supervisor_ignores_sighup(tmp_path):
    run_dir = start(tmp_path, ["sleep", "100"])
    wait_running(run_dir)
    supervisor = read_status(run_dir).supervisor_pid
    os.kill(supervisor, signal.SIGHUP)
    time.sleep(0.3)
    assert procs.is_alive(supervisor) and state_of(run_dir) == "running"


def test_a_second_supervisor_exits_while_the_lock_is_held(tmp_path, cli_env):
    run_dir = start(tmp_path, ["sleep", "100"])
    wait_running(run_dir)
    proc = subprocess.run([PY, "-m", "yolotui.supervisor.process", str(run_dir)], env=cli_env,
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 3
    assert state_of(run_dir) == "running"


def test_stop_ends_the_run_and_its_whole_process_group(tmp_path):
    code = ("import subprocess, time; subprocess.Popen(['sleep', '100']); print('rea' + 'dy', flush=True); "
            "time.sleep(100)")
    run_dir = start(tmp_path, [PY, "-c", code])
    pgid = wait_running(run_dir)
    wait_for(lambda: len(procs.group_members(pgid)) == 2)
    result = stop(run_dir, grace_s=10)
    assert result.was_running and result.state == "stopped"
    assert result.term_sent and not result.kill_sent
    assert "SIGTERM to process group" in result.message
    assert procs.group_members(pgid) == []
    final = read_status(run_dir)
    assert final.state == "stopped" and final.failure_class is None
    assert final.stop["term_sent"] and final.stop["kill_sent"] is None
    assert not (run_dir / STOP_REQUEST).exists()
    wait_for(lambda: not lock.is_held(run_dir), timeout=5)


def test_stop_sends_sigkill_after_the_grace_period(tmp_path):
    code = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('rea' + 'dy', flush=True); "
            "time.sleep(100)")
    run_dir = start(tmp_path, [PY, "-c", code])
    pgid = wait_running(run_dir)
    wait_for(lambda: "\nready\n" in (run_dir / TRAIN_LOG).read_text())
    result = stop(run_dir, grace_s=0.5)
    assert result.state == "stopped" and result.term_sent and result.kill_sent
    assert "SIGKILL after 0.5 s" in result.message
    assert procs.group_members(pgid) == []
    assert read_status(run_dir).exit_signal == signal.SIGKILL


def test_force_stop_kills_at_once(tmp_path):
    run_dir = start(tmp_path, ["sleep", "100"])
    pgid = wait_running(run_dir)
    result = stop(run_dir, force=True)
    assert result.state == "stopped" and result.kill_sent and not result.term_sent
    assert procs.group_members(pgid) == []


def test_stop_during_restart_backoff_ends_stopped(tmp_path):
    run_dir = start(tmp_path, [PY, "-c", "raise SystemExit(1)"], max_attempts=3, backoff_s=30)
    wait_state(run_dir, "restarting")
    result = stop(run_dir, grace_s=1)
    assert result.state == "stopped"
    assert len(read_status(run_dir).attempts) == 1


def test_stop_of_a_run_that_is_not_running_changes_nothing(tmp_path):
    run_dir = start(tmp_path, ["true"])
    wait_state(run_dir, "finished")
    wait_for(lambda: not lock.is_held(run_dir), timeout=5)  # the supervisor exits after the final write
    before = (run_dir / "status.json").read_bytes()
    result = stop(run_dir)
    assert not result.was_running and result.state == "finished"
    assert "not running" in result.message
    assert (run_dir / "status.json").read_bytes() == before
    assert not (run_dir / STOP_REQUEST).exists()


def test_save_now_signals_a_trainer_that_handles_sigusr1(tmp_path):
    marker = tmp_path / "saved.txt"
    code = ("import signal, sys, time\n"
            "def save(*_):\n    open(sys.argv[1], 'a').write('saved\\n')\n"
            "signal.signal(signal.SIGUSR1, save)\nprint('rea' + 'dy', flush=True)\n"
            "while True:\n    time.sleep(0.05)\n")
    run_dir = start(tmp_path, [PY, "-c", code, str(marker)], extra={"save_signal": True})
    wait_running(run_dir)
    wait_for(lambda: "\nready\n" in (run_dir / TRAIN_LOG).read_text())
    result = save_now(run_dir)
    assert "SIGUSR1" in result.message
    wait_for(lambda: marker.exists() and "saved" in marker.read_text(), timeout=5)
    assert state_of(run_dir) == "running"


def test_save_now_refuses_a_command_that_does_not_handle_sigusr1(tmp_path):
    run_dir = start(tmp_path, ["sleep", "100"])
    pid = wait_running(run_dir)
    with pytest.raises(UserError, match="SIGUSR1"):
        save_now(run_dir)
    assert procs.is_alive(pid)


def test_launch_refuses_a_missing_program_before_anything_starts(tmp_path):
    run_dir = create_run_dir(tmp_path / "proj", "exp")
    with pytest.raises(UserError, match="not found on PATH"):
        launch(run_dir, ["no-such-program-yolotui"], name="exp")
    assert not (run_dir / "status.json").exists() and index.entries() == []


def test_launch_refuses_a_live_run_folder(tmp_path):
    run_dir = start(tmp_path, ["sleep", "100"])
    wait_running(run_dir)
    with pytest.raises(UserError, match="live"):
        launch(run_dir, ["sleep", "1"], name="exp")
    assert json.loads((run_dir / "status.json").read_text())["state"] == "running"


def test_supervisor_records_a_bad_run_yaml_as_failed(tmp_path, cli_env):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.yaml").write_text("name: x\ncommand: [unclosed\n")
    proc = subprocess.run([PY, "-m", "yolotui.supervisor.process", str(run_dir)], env=cli_env,
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    final = read_status(run_dir)
    assert final.state == "failed" and "run.yaml" in final.message and "line" in final.message
    assert not lock.is_held(run_dir)


def test_stop_returns_once_the_supervisor_let_go_so_a_resume_can_follow(tmp_path, yolotui_home):
    """A stop that returned while the supervisor still sent its last notification (or made the mirror's last copy)
    left `yolotui stop X && yolotui resume X` to meet a run 'live, owned by the supervisor of X'."""
    from spotkit import write_settings

    write_settings(yolotui_home, {"notify": {"command": f"{PY} -c \"import time; time.sleep(3)\"", "timeout_s": 10}})
    run_dir = start(tmp_path, [PY, "-c", "import time; print('ready', flush=True); time.sleep(100)"])
    wait_running(run_dir)
    result = stop(run_dir, grace_s=10)
    assert result.state == "stopped"
    fd = lock.claim(run_dir, "a resume right after the stop")  # RunBusy before: the hook was still running
    lock.release(fd)
