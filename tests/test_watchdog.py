"""The stall watchdog and the remedies that fit: an injected hang and a SIGSTOP'd trainer end as `hang`
and resume; comm retries on their own budget; cuDNN memory failures are oom; the OOM killer is `host-oom`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from runs_helpers import reap_runs, wait_for  # noqa: F401 - reap_runs is an autouse fixture
from test_recovery_runs import events_of, train, wait_ended

from yolotui.failure_text import classify_text
from yolotui.runs.status import read_status
from yolotui.supervisor import policy
from yolotui.supervisor.hostoom import MemoryWatch, oom_kill_count
from yolotui.supervisor.watchdog import StallWatch, WatchdogSettings, step_times


@pytest.fixture
def env(cli_env):
    return {**cli_env, "YOLOTUI_TORCH_THREADS": "1", "OMP_NUM_THREADS": "1"}


@pytest.fixture
def quick_escalation(yolotui_home):
    """settings.yaml: a one-second wait for the checkpoint and for SIGTERM (defaults are 30 s each)."""
    path = Path(yolotui_home) / "config" / "settings.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"watchdog": {"checkpoint_wait_s": 1, "term_grace_s": 1}}))


def _assert_hang_then_resumed(run_dir: Path, last_event_text: str) -> dict:
    assert wait_ended(run_dir) == "finished"
    status = read_status(run_dir)
    first, second = status.attempts[:2]
    assert first["failure_class"] == "hang" and "no progress for" in first["message"]
    assert last_event_text in first["message"]
    assert first["stall"]["trainer"]["state"] in ("S", "T", "R", "D")
    assert second["failure_class"] is None and len(status.attempts) == 2
    remedy = events_of(run_dir, "remedy")[0]
    assert remedy["failure_class"] == "hang" and remedy["next_attempt"] == 2
    log = (run_dir / "supervisor.log").read_text()
    assert "stall watchdog: sending SIGUSR1" in log and "stall watchdog: sending SIGTERM" in log
    return first


def test_an_injected_hang_is_stopped_and_resumed(tmp_path, yolotui_cmd, env, quick_escalation):
    run_dir, _ = train(tmp_path, yolotui_cmd, env, "--stall-timeout", "4", fault="hang@step=3", n_train=16)
    first = _assert_hang_then_resumed(run_dir, "last event: batch ")
    assert first["stall"]["trainer"]["state"] == "S"  # asleep in the injected hang
    assert "sending SIGKILL" in (run_dir / "supervisor.log").read_text()  # it ignored SIGTERM


def test_a_trainer_stopped_with_sigstop_is_detected_the_same_way(tmp_path, yolotui_cmd, env, quick_escalation):
    run_dir, _ = train(tmp_path, yolotui_cmd, env, "--stall-timeout", "4", "--batch", "2", n_train=16)
    wait_for(lambda: events_of(run_dir, "batch"), timeout=120, interval=0.05)
    os.kill(read_status(run_dir).trainer_pid, signal.SIGSTOP)
    first = _assert_hang_then_resumed(run_dir, "last event: batch ")
    assert first["stall"]["trainer"]["state"] == "T"


def test_the_limit_follows_the_median_step_and_the_setup_phase(tmp_path):
    settings = WatchdogSettings(min_s=10, factor=20, setup_s=100)
    watch = StallWatch(settings, tmp_path / "events.jsonl", 0, tmp_path / "train.log", 0, uses_events=True,
                       save_signal=True)
    assert watch.limit_s() == 100  # before the first event: loading data may take long
    batches = [{"type": "batch", "epoch": 0, "batch": b, "ts": 1000 + 2.0 * b} for b in range(1, 6)]
    assert step_times(batches) == [2.0, 2.0, 2.0, 2.0]
    watch.recent_batches.extend(batches)
    watch.seen_event, watch.last_event = True, batches[-1]
    assert watch.limit_s() == 40  # 20 x the 2 s median step, above the 10 s floor
    watch.last_event = {**batches[-1], "batches": 5}
    assert watch.limit_s() == 100  # the epoch's last batch: validation runs without events
    assert WatchdogSettings.from_configs({"watchdog": {"min_s": 3}}, {"watchdog": {"min_s": 9, "factor": 2}}) \
        == WatchdogSettings(min_s=3, factor=2)


def test_exec_runs_are_watched_by_log_growth(tmp_path, yolotui_cmd, cli_env, quick_escalation):
    code = ("import os, sys, time\n"
            "if os.environ['YOLOTUI_ATTEMPT'] == '1':\n"
            "    print('working', flush=True); time.sleep(300)\n"
            "print('second attempt done', flush=True)\n")
    argv = [*yolotui_cmd, "exec", "--project", str(tmp_path / "runs"), "--name", "x", "--max-restarts", "1",
            "--stall-timeout", "2", "--", sys.executable, "-c", code]
    subprocess.run(argv, env=cli_env, check=True, capture_output=True, timeout=60)
    run_dir = tmp_path / "runs" / "x"
    assert wait_ended(run_dir, timeout=60) == "finished"
    first = read_status(run_dir).attempts[0]
    assert first["failure_class"] == "hang" and "last event: train.log output" in first["message"]
    assert "SIGUSR1" not in (run_dir / "supervisor.log").read_text()  # exec commands may die of SIGUSR1


# ------------------------------------------------------------------------------------------------ remedies

def _decide(failure_message: str, attempt: int = 1, **record):
    base = {"attempt": attempt, "exit_code": 1, "exit_signal": None, "command": ["x", "--batch-size", "16"],
            "ended": 10_000.0}
    events = [{"type": "error", "kind": "comm" if "reset" in failure_message else "crash",
               "message": failure_message}]
    return policy.decide({**base, **record}, {"backend": "yolotui", "restart": {"max_attempts": 2}}, events)


def test_comm_retries_have_their_own_budget_and_set_distributed_debug():
    decision = _decide("ConnectionResetError: reset by peer", attempt=5, uncounted_attempts=4,
                       comm_failures=[9_000.0 + i for i in range(4)])
    assert decision.retry and not decision.counted and "comm retry 5/10 within 1 h" in decision.remedy
    assert decision.changes["env"]["NCCL_DEBUG"] == "INFO"
    assert decision.changes["env"]["TORCH_DISTRIBUTED_DEBUG"] == "DETAIL"
    assert decision.settings["NCCL_DEBUG"] == [None, "INFO"]
    spent = _decide("ConnectionResetError: reset by peer", attempt=12, uncounted_attempts=10,
                    comm_failures=[9_000.0 + i for i in range(10)])
    assert spent.counted and not spent.retry and "attempt limit reached (2)" in spent.remedy  # 12 - 10 free = 2
    old = _decide("ConnectionResetError: reset by peer", attempt=12, uncounted_attempts=10,
                  comm_failures=[1.0 + i for i in range(10)])  # those were hours ago: the budget is back
    assert not old.counted
    crash = _decide("RuntimeError: boom", attempt=2)
    assert not crash.retry and "attempt limit reached (2)" in crash.remedy


@pytest.mark.parametrize("text", [
    "RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR",
    "RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
    "RuntimeError: GET was unable to find an engine to execute this computation",
])
def test_cudnn_memory_failures_are_oom(text):
    assert classify_text(text) == "oom"
    from yolotui.engine.train.failures import classify_exception

    assert classify_exception(RuntimeError(text)) == "oom"


def _fake_cgroup(folder: Path, kills: int, limit: int = 8 << 30) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "memory.events").write_text(f"low 0\nhigh 0\nmax 3\noom 1\noom_kill {kills}\n")
    (folder / "memory.max").write_text(f"{limit}\n")
    return folder


def test_host_oom_evidence_from_the_cgroup_or_the_rss(tmp_path, monkeypatch):
    cgroup = _fake_cgroup(tmp_path / "cg", kills=2)
    monkeypatch.setenv("YOLOTUI_CGROUP_DIR", str(cgroup))
    watch = MemoryWatch()
    assert watch.kills_before == 2 and watch.limit == 8 << 30 and watch.evidence([]) is None
    _fake_cgroup(cgroup, kills=3)
    assert oom_kill_count(cgroup) == 3 and "oom_kill count rose from 2 to 3" in watch.evidence([])
    calm = MemoryWatch()
    calm.last_fraction = 0.97
    assert "97% of the 8.0 GiB limit" in calm.evidence([])
    record = {"attempt": 1, "exit_code": None, "exit_signal": signal.SIGKILL, "host_oom": "oom_kill rose",
              "command": ["python", "-m", "yolotui.engine", "train"]}
    config = {"backend": "yolotui", "restart": {"max_attempts": 3}, "options": {"workers": 8, "cache": "ram"}}
    decision = policy.decide(record, config, [])
    assert decision.failure_class == "host-oom" and decision.retry
    assert decision.changes["args"] == {"--workers": 4, "--cache": "none"}
    assert decision.settings == {"workers": [8, 4], "cache": ["ram", None]}
    plain = policy.decide({**record, "host_oom": None}, config, [])
    assert plain.failure_class == "killed" and not plain.retry


HOGGER = ("import os, signal, sys, time\n"
          "if os.environ['YOLOTUI_ATTEMPT'] == '1':\n"
          "    open(os.environ['CG'] + '/memory.events', 'w').write('oom_kill 1\\n')\n"
          "    os.kill(os.getpid(), signal.SIGKILL)\n"
          "print('argv', sys.argv[1:], flush=True)\n")


def test_a_simulated_oom_kill_resumes_with_half_the_workers_and_no_ram_cache(tmp_path, yolotui_cmd, cli_env):
    cgroup = _fake_cgroup(tmp_path / "cg", kills=0)
    script = tmp_path / "hog.py"
    script.write_text(HOGGER)
    env = {**cli_env, "YOLOTUI_CGROUP_DIR": str(cgroup), "CG": str(cgroup)}
    argv = [*yolotui_cmd, "exec", "--project", str(tmp_path / "runs"), "--name", "h", "--max-restarts", "1", "--",
            sys.executable, str(script), "--workers", "8", "--cache", "ram"]
    subprocess.run(argv, env=env, check=True, capture_output=True, timeout=60)
    run_dir = tmp_path / "runs" / "h"
    assert wait_ended(run_dir, timeout=60) == "finished"
    first, second = read_status(run_dir).attempts
    assert first["failure_class"] == "host-oom" and "oom_kill count rose from 0 to 1" in first["message"]
    assert "data-loader workers 8 -> 4 and no --cache ram" in first["remedy"]
    assert second["command"][-2:] == ["--workers", "4"] and "--cache" not in second["command"]
    assert "argv ['--workers', '4']" in (run_dir / "train.log").read_text()
