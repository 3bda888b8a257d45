"""Processes and races: one owner per run folder, stops that never lose work, stray signals.

Trainers here are tiny Python scripts (no torch), so the
whole file runs in seconds.
"""

from __future__ import annotations

import json
import math
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
from yolotui.runs import lock
from yolotui.runs.layout import STOP_REQUEST, SUPERVISOR_LOG, TRAIN_LOG
from yolotui.runs.runconfig import read_run_config
from yolotui.runs.status import effective_state, read_status
from yolotui.runs.store import create_run_dir
from yolotui.supervisor.control import stop

PY = sys.executable
REPO = Path(__file__).resolve().parent.parent

# A trainer that ignores SIGTERM (as a command with its own long shutdown would) and says when it is up.
STUBBORN = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); "
            "time.sleep(300)")
# A trainer that, on SIGTERM, finishes its 'step' (1.5 s), writes 'saved' and exits 0, as the engine does.
GRACEFUL = ("import signal, sys, time\n"
            "def bye(*_):\n"
            "    time.sleep(1.5); print('saved', flush=True); sys.exit(0)\n"
            "signal.signal(signal.SIGTERM, bye)\n"
            "print('up', flush=True)\n"
            "time.sleep(300)\n")


def start(tmp_path: Path, command: list[str], name: str = "exp", **kwargs) -> Path:
    run_dir = create_run_dir(tmp_path / "proj", name)
    launch(run_dir, command, name=run_dir.name, **kwargs)
    return run_dir


def wait_up(run_dir: Path) -> int:
    """Wait until the trainer printed 'up'; returns its pid."""
    wait_for(lambda: "up\n" in _read(run_dir / TRAIN_LOG), timeout=15)
    return read_status(run_dir).trainer_pid


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _cli(args: list[str], env: dict[str, str] | None = None, **kwargs) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([PY, "-m", "yolotui", *args], capture_output=True, text=True, env=full_env,
                          timeout=60, **kwargs)


# ---------------------------------------------------------------------------------------------- one trainer per run

def test_trainer_keeps_the_run_owned_after_its_supervisor_dies_and_stop_finds_it(tmp_path):
    run_dir = start(tmp_path, [PY, "-c", STUBBORN])
    trainer = wait_up(run_dir)
    supervisor = read_status(run_dir).supervisor_pid
    os.kill(supervisor, signal.SIGKILL)
    wait_for(lambda: not procs.is_alive(supervisor), timeout=5)
    time.sleep(0.3)
    # The trainer still runs, so the run is still live: not "interrupted, nothing is running".
    assert procs.is_alive(trainer)
    assert lock.is_held(run_dir) and effective_state(run_dir) == "running"
    assert trainer in lock.holders(run_dir)
    # No second trainer: a new launch into the folder is refused, naming the owner.
    with pytest.raises(UserError, match="live, owned by"):
        launch(run_dir, ["sleep", "100"], name=run_dir.name)
    # `stop` finds the orphaned trainer and stops it (SIGTERM ignored: SIGKILL after the grace).
    result = stop(run_dir, grace_s=0.5, timeout_s=10)
    assert result.was_running and "orphaned" in result.message and result.kill_sent
    assert not procs.is_alive(trainer)
    assert effective_state(run_dir) == "interrupted"


def test_trainer_holds_the_lock_descriptor(tmp_path):
    run_dir = start(tmp_path, [PY, "-c", STUBBORN])
    trainer = wait_up(run_dir)
    supervisor = read_status(run_dir).supervisor_pid
    assert set(lock.holders(run_dir)) >= {trainer, supervisor}
    assert stop(run_dir, force=True).state == "stopped"


# ---------------------------------------------------------------------------------------------- exactly one winner of two launches

LAUNCHER = """
import sys
from yolotui.errors import UserError
from yolotui.placement.launcher import launch
try:
    launch(sys.argv[1], ["sleep", sys.argv[2]], name="exp")
except UserError as exc:
    print(exc)
    sys.exit(exc.exit_code)
print("started", sys.argv[2])
"""


def test_two_simultaneous_launches_exactly_one_wins_and_the_loser_names_it(tmp_path):
    run_dir = create_run_dir(tmp_path / "proj", "exp")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    children = [subprocess.Popen([PY, "-c", LAUNCHER, str(run_dir), seconds], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, env=env) for seconds in ("101", "102")]
    outputs = [(child.wait(timeout=60), child.stdout.read().strip()) for child in children]
    codes = sorted(code for code, _ in outputs)
    assert codes == [0, 1], outputs
    winner = next(out for code, out in outputs if code == 0)
    loser = next(out for code, out in outputs if code == 1)
    assert len(loser.splitlines()) == 1 and "live, owned by pid" in loser
    # run.yaml holds the winner's command only: the loser touched nothing.
    assert read_run_config(run_dir)["command"] == ["sleep", winner.split()[-1]]


# ---------------------------------------------------------------------------------------------- a stop during start-up

def test_stop_during_start_up_stops_the_run_at_once(tmp_path):
    run_dir = create_run_dir(tmp_path / "proj", "exp")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([PY, "-c", LAUNCHER, str(run_dir), "300"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # The launch has begun writing the run's files; its supervisor is not up yet. (Without the launcher's
    # queued status the run read as interrupted and `stop` said "nothing to stop" while the run went on.)
    wait_for(lambda: (run_dir / "status.json").exists(), timeout=30, interval=0.002)
    result = stop(run_dir, grace_s=5, timeout_s=20)
    child.wait(timeout=30)
    assert result.was_running, result.message
    wait_for(lambda: effective_state(run_dir) == "stopped", timeout=10)
    status = read_status(run_dir)
    assert status.trainer_pid is None
    assert not lock.is_held(run_dir)


# ---------------------------------------------------------------------------------------------- stray signals

def test_stray_signals_do_not_kill_the_supervisor(tmp_path):
    run_dir = start(tmp_path, [PY, "-c", GRACEFUL])
    wait_up(run_dir)
    supervisor = read_status(run_dir).supervisor_pid
    for sig in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM):
        os.kill(supervisor, sig)
    wait_for(lambda: "ignored SIGALRM" in _read(run_dir / SUPERVISOR_LOG), timeout=5)
    assert procs.is_alive(supervisor) and effective_state(run_dir) == "running"
    log = _read(run_dir / SUPERVISOR_LOG)
    assert "ignored SIGUSR1" in log and "ignored SIGUSR2" in log
    assert stop(run_dir, grace_s=10).state == "stopped"


# ---------------------------------------------------------------------------------------------- a malformed stop.request

@pytest.mark.parametrize("content", [b"[1, 2]", b'{"grace_s": "soon", "force": "yes"}', b"\xff\xfe garbage",
                                     b'{"grace_s": NaN}'])
def test_malformed_stop_request_is_a_graceful_stop_not_a_crash(tmp_path, content):
    run_dir = start(tmp_path, [PY, "-c", GRACEFUL])
    wait_up(run_dir)
    (run_dir / STOP_REQUEST).write_bytes(content)
    wait_for(lambda: effective_state(run_dir) == "stopped", timeout=15)
    status = read_status(run_dir)
    assert status.failure_class is None and status.stop["kill_sent"] is None and status.stop["term_sent"]
    assert "saved" in _read(run_dir / TRAIN_LOG)  # the trainer had its graceful exit (its checkpoint)
    assert "warning: stop.request:" in _read(run_dir / SUPERVISOR_LOG)  # what was ignored, said


# ---------------------------------------------------------------------------------------------- the stop's grace

def _fake_events(run_dir: Path, step_s: float) -> None:
    """Batch and checkpoint events that say one step takes `step_s` seconds."""
    now = time.time()
    lines = [{"ts": now - 3 * step_s + i * step_s, "type": "batch", "attempt": 1, "epoch": 0, "epochs": 1,
              "batch": i + 1, "batches": 10} for i in range(3)]
    lines.append({"ts": now, "type": "checkpoint", "attempt": 1, "epoch": 0, "step": 3, "seconds": 2.0})
    with open(run_dir / "events.jsonl", "a") as handle:
        handle.writelines(json.dumps(line) + "\n" for line in lines)


def test_grace_follows_the_measured_step_time(tmp_path):
    run_dir = start(tmp_path, [PY, "-c", GRACEFUL])
    wait_up(run_dir)
    _fake_events(run_dir, step_s=40.0)  # a step takes 40 s: a 0.5 s grace would lose it
    result = stop(run_dir, grace_s=0.5, timeout_s=20)
    assert result.state == "stopped" and not result.kill_sent
    status = read_status(run_dir)
    assert status.stop["grace_used_s"] >= 120 and "steps take up to 40.0 s" in status.stop["grace_why"]
    assert "saved" in _read(run_dir / TRAIN_LOG)


def test_a_checkpoint_being_written_is_never_killed(tmp_path):
    writer = ("import os, signal, sys, time\n"
              "def bye(*_):\n"
              "    path = os.path.join(os.environ['YOLOTUI_RUN_DIR'], 'weights', '.last.pt.x.tmp')\n"
              "    for _ in range(20):\n"
              "        open(path, 'ab').write(b'x' * 1000); time.sleep(0.1)\n"
              "    os.replace(path, path.replace('.last.pt.x.tmp', 'last.pt')); print('saved', flush=True); sys.exit(0)\n"
              "signal.signal(signal.SIGTERM, bye)\n"
              "print('up', flush=True)\n"
              "time.sleep(300)\n")
    run_dir = start(tmp_path, [PY, "-c", writer])
    wait_up(run_dir)
    result = stop(run_dir, grace_s=0.3, timeout_s=20)
    assert result.state == "stopped" and not result.kill_sent
    assert (run_dir / "weights" / "last.pt").stat().st_size == 20000
    assert "being written" in _read(run_dir / SUPERVISOR_LOG)


def test_force_overrides_a_pending_graceful_stop_at_once(tmp_path):
    run_dir = start(tmp_path, [PY, "-c", STUBBORN])
    trainer = wait_up(run_dir)
    stop(run_dir, grace_s=600, wait=False)
    wait_for(lambda: read_status(run_dir).state == "stopping", timeout=5)
    started = time.monotonic()
    result = stop(run_dir, force=True, timeout_s=10)
    assert result.state == "stopped" and result.kill_sent
    assert time.monotonic() - started < 5
    assert not procs.is_alive(trainer)


def test_a_supervisor_ending_between_status_read_and_lock_check_is_not_interrupted(tmp_path):
    """The forced-stop race: status.json read as `stopping`, then the supervisor wrote `stopped` and let go of
    the lock before the lock was looked at. The state shown is the supervisor's final word, not interrupted."""
    from yolotui.runs.status import RunStatus, write_status

    run_dir = create_run_dir(tmp_path / "proj", "exp")
    write_status(run_dir, RunStatus(name="exp", state="stopped"))
    stale = RunStatus(name="exp", state="stopping", supervisor_pid=os.getpid())
    assert effective_state(run_dir, stale) == "stopped"
    write_status(run_dir, RunStatus(name="exp", state="running"))  # a supervisor that really died
    assert effective_state(run_dir, stale) == "interrupted"


def test_ls_sees_the_final_state_of_a_supervisor_that_ended_while_it_looked(tmp_path, monkeypatch):
    from yolotui.runs import summary
    from yolotui.runs.status import RunStatus, write_status

    run_dir = create_run_dir(tmp_path / "proj", "exp")
    write_status(run_dir, RunStatus(name="exp", state="stopping", supervisor_pid=os.getpid()))
    real = summary.derived_state
    looks = []

    def supervisor_ends_meanwhile(*args, **kwargs):
        looks.append(args[1])
        if len(looks) == 1:
            write_status(run_dir, RunStatus(name="exp", state="stopped"))
        return real(*args, **kwargs)

    monkeypatch.setattr(summary, "derived_state", supervisor_ends_meanwhile)
    assert summary.summarize(run_dir).state == "stopped"
    assert looks == ["stopping", "stopped"]


@pytest.mark.parametrize("grace", [math.nan, math.inf, -1.0])
def test_nan_inf_and_negative_grace_are_refused(tmp_path, grace):
    run_dir = start(tmp_path, [PY, "-c", STUBBORN])
    wait_up(run_dir)
    with pytest.raises(UserError, match="grace period"):
        stop(run_dir, grace_s=grace)
    assert not (run_dir / STOP_REQUEST).exists()
    proc = _cli(["stop", str(run_dir), "--grace", str(grace)])
    assert proc.returncode != 0 and "grace" in proc.stderr and "Traceback" not in proc.stderr
    assert effective_state(run_dir) == "running"


# --------------------------------------------------------------------------------------------- symlinks and --exist-ok

@pytest.mark.parametrize("name", ["train.log", "events.jsonl", "batches.jsonl", "status.json"])
def test_run_files_that_are_symlinks_are_refused_not_followed(tmp_path, name):
    from yolotui.runs.atomic import RunFileLink
    from yolotui.runs.events import EventWriter
    from yolotui.runs.status import RunStatus, write_status

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    run_dir = create_run_dir(tmp_path / "proj", "exp")
    (run_dir / name).symlink_to(victim)
    with pytest.raises(RunFileLink, match=name):
        if name.endswith(".jsonl"):
            EventWriter(run_dir / "events.jsonl").emit("batch" if name == "batches.jsonl" else "start")
        elif name == "status.json":
            write_status(run_dir, RunStatus(name="exp"))
        else:
            launch(run_dir, ["true"], name="exp")
            wait_for(lambda: read_status(run_dir) and read_status(run_dir).state == "failed", timeout=10)
            raise RunFileLink(read_status(run_dir).message or "")
    assert victim.read_text() == "precious\n"


def test_results_csv_symlink_is_refused(tmp_path):
    from yolotui.runs.atomic import RunFileLink
    from yolotui.runs.results import append_row

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "results.csv").symlink_to(victim)
    with pytest.raises(RunFileLink, match="results.csv"):
        append_row(tmp_path / "results.csv", 0, [0.0] * 13)
    assert victim.read_text() == "precious\n"


def test_the_shims_do_not_write_through_links(tmp_path, capsys):
    from yolotui.backends import shimkit

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    for name in ("events.jsonl", "batches.jsonl"):
        (tmp_path / name).symlink_to(victim)
    shimkit.Events(str(tmp_path / "events.jsonl"), 1).emit("start")  # said in train.log; training goes on
    shimkit.Events(str(tmp_path / "events.jsonl"), 1).emit("batch")
    assert capsys.readouterr().out.count("yolotui shim: cannot write") == 2
    results = tmp_path / "results.csv"
    results.write_text("header\n")
    (tmp_path / f"results.csv.tmp.{os.getpid()}").symlink_to(victim)  # a planted temp name
    shimkit.atomic_write(str(results), "header\nrow\n")
    assert results.read_text() == "header\nrow\n" and not results.is_symlink()
    assert victim.read_text() == "precious\n"


def test_exist_ok_keeps_old_logs_under_a_clear_name(tmp_path):
    run_dir = create_run_dir(tmp_path / "proj", "exp")
    for name in ("train.log", "events.jsonl", "supervisor.log", "results.csv", "status.json"):
        (run_dir / name).write_text(f"old {name}\n")
    from yolotui.runs.store import claim_run_dir

    again, fd = claim_run_dir(tmp_path / "proj", "exp", True, "test")
    lock.release(fd)
    assert again == run_dir
    for name in ("train.log", "events.jsonl", "supervisor.log", "results.csv", "status.json"):
        assert not (run_dir / name).exists()
    kept = [p for p in run_dir.iterdir() if p.name.startswith("previous-")]
    assert len(kept) == 1 and (kept[0] / "train.log").read_text() == "old train.log\n"


# --------------------------------------------------------------------------------------------- a full disk

def test_launch_refuses_a_disk_without_room_for_two_checkpoints(tmp_path, monkeypatch):
    from yolotui.placement import diskspace

    monkeypatch.setattr(diskspace, "free_bytes", lambda folder: 5_000_000)
    run_dir = create_run_dir(tmp_path / "proj", "exp")
    (run_dir / "weights" / "last.pt").write_bytes(b"x" * 3_000_000)
    with pytest.raises(UserError, match=r"not enough disk space in .*exp: 5\.0 MB free"):
        launch(run_dir, ["true"], name="exp")
    assert not (run_dir / "run.yaml").exists() and not lock.is_held(run_dir)


def test_supervisor_survives_enospc_writing_status(tmp_path, monkeypatch):
    import errno

    from yolotui.runs import status as status_module
    from yolotui.runs.status import RunStatus, write_status, write_status_resilient

    run_dir = create_run_dir(tmp_path / "proj", "exp")
    write_status(run_dir, RunStatus(name="exp", state="running", message="x" * 200))

    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(status_module, "atomic_write_json", full)
    problem = write_status_resilient(run_dir, RunStatus(name="exp", state="failed", failure_class="disk"))
    assert "No space left on device" in problem and "rewritten in place" in problem
    assert read_status(run_dir).state == "failed" and read_status(run_dir).failure_class == "disk"


def test_disk_full_is_class_disk_not_retried_and_names_folder_and_free_space(tmp_path):
    from yolotui.supervisor.policy import decide

    record = {"exit_code": 1, "exit_signal": None, "run_dir": str(tmp_path), "name": "exp",
              "log_tail": "Traceback...\nOSError: [Errno 28] No space left on device\n"}
    decision = decide(record, {"restart": {"max_attempts": 5}}, [])
    assert decision.failure_class == "disk" and not decision.retry and decision.state == "failed"
    assert str(tmp_path) in decision.message and "free" in decision.message
    event = {"type": "error", "kind": "disk", "message": "OSError: [Errno 28] No space left on device"}
    assert decide({**record, "log_tail": ""}, {}, [event]).failure_class == "disk"


def test_trainer_classifies_enospc_as_disk():
    import errno

    from yolotui.engine.train.failures import classify_exception

    assert classify_exception(OSError(errno.ENOSPC, "No space left on device")) == "disk"
