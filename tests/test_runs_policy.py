"""The restart policy: classification of attempt exits and how the next command is built."""

from __future__ import annotations

import signal

from yolotui.runs.runconfig import set_flag
from yolotui.supervisor.decision import Decision, backoff_delay
from yolotui.supervisor.policy import command_for_attempt, decide, env_for_attempt, merge_changes

CONFIG = {"command": ["python", "train.py", "--batch-size", "16"], "restart": {"max_attempts": 3, "backoff_s": 2}}


def record(**fields):
    return {"attempt": 1, "exit_code": None, "exit_signal": None, "stop_requested": False, "signals_sent": [],
            **fields}


def test_exit_zero_finishes():
    decision = decide(record(exit_code=0), CONFIG, [])
    assert decision == Decision(retry=False, state="finished", message="finished (exit code 0)")


def test_requested_stop_is_stopped_whatever_the_exit():
    for fields in ({"exit_signal": signal.SIGTERM}, {"exit_code": 1}, {"exit_signal": signal.SIGKILL}):
        decision = decide(record(stop_requested=True, signals_sent=[signal.SIGTERM], **fields), CONFIG, [])
        assert not decision.retry and decision.state == "stopped" and decision.failure_class is None


def test_signal_not_sent_by_the_supervisor_is_killed_without_retry():
    decision = decide(record(exit_signal=signal.SIGKILL), CONFIG, [])
    assert not decision.retry and decision.failure_class == "killed" and decision.state == "failed"
    # 128 + SIGTERM: a trainer (or a shell) reporting it was terminated from outside
    assert decide(record(exit_code=143), CONFIG, []).failure_class == "killed"


def test_nonzero_exit_is_a_crash_retried_while_attempts_remain():
    first = decide(record(exit_code=1), CONFIG, [])
    assert first.retry and first.failure_class == "crash" and first.delay_s == 2
    second = decide(record(attempt=2, exit_code=1), CONFIG, [])
    assert second.retry and second.delay_s == 4
    last = decide(record(attempt=3, exit_code=1), CONFIG, [])
    assert not last.retry and last.state == "failed" and "attempt limit" in last.remedy


def test_default_is_a_single_attempt():
    assert not decide(record(exit_code=1), {"command": ["x"]}, []).retry


def test_error_event_names_the_class_and_data_is_never_retried():
    events = [{"type": "epoch"}, {"type": "error", "kind": "data", "message": "data.yaml line 4: no 'val'"}]
    decision = decide(record(exit_code=1), CONFIG, events)
    assert not decision.retry and decision.failure_class == "data"
    assert "data.yaml line 4" in decision.message
    oom = decide(record(exit_code=1), CONFIG, [{"type": "error", "kind": "oom", "message": "CUDA out of memory"}])
    assert oom.retry and oom.failure_class == "oom"


def test_spawn_error_is_not_retried():
    decision = decide(record(spawn_error="foo: No such file or directory"), CONFIG, [])
    assert not decision.retry and decision.failure_class == "data"


def test_backoff_doubles_and_is_capped():
    assert [backoff_delay(n, 2, 10) for n in (1, 2, 3, 4)] == [2, 4, 8, 10]


def test_set_flag_replaces_appends_and_removes():
    argv = ["train.py", "--batch-size", "16", "--img=640", "--resume"]
    assert set_flag(argv, "--batch-size", 8) == ["train.py", "--batch-size", "8", "--img=640", "--resume"]
    assert set_flag(argv, "--img", 320)[3:5] == ["--img", "320"]
    assert set_flag(argv, "--workers", 2)[-2:] == ["--workers", "2"]
    assert set_flag(argv, "--resume", None) == ["train.py", "--batch-size", "16", "--img=640"]
    assert set_flag(["a"], "--exist-ok", True) == ["a", "--exist-ok"]


def test_command_for_attempt_adds_resume_args_on_retries_and_applies_changes():
    config = {**CONFIG, "resume_args": ["--resume"], "env": {"A": "1"}}
    assert command_for_attempt(config, 1, {}) == ["python", "train.py", "--batch-size", "16"]
    changes = merge_changes({}, {"args": {"--batch-size": 8}, "env": {"B": "2"}})
    changes = merge_changes(changes, {"args": {"--accumulate": 2}})
    argv = command_for_attempt(config, 2, changes)
    assert argv == ["python", "train.py", "--batch-size", "8", "--resume", "--accumulate", "2"]
    assert env_for_attempt(config, changes) == {"A": "1", "B": "2"}
