"""Recovery building blocks without processes: fault parsing, exception classes, remedies, logout, the unit."""

from __future__ import annotations

import signal
from types import SimpleNamespace

import pytest

from yolotui.errors import UserError
from yolotui.placement import logout
from yolotui.supervisor import remedies
from yolotui.supervisor.policy import command_for_attempt, decide, env_for_attempt, merge_changes

ENGINE = {"name": "r", "backend": "yolotui", "command": ["python", "-m", "yolotui.engine", "train", "--run-dir", "R"],
          "restart": {"max_attempts": 5, "backoff_s": 2}}


def record(**fields):
    return {"attempt": 1, "exit_code": 1, "exit_signal": None, "stop_requested": False, "signals_sent": [],
            "command": ENGINE["command"], **fields}


def error(kind, message="boom"):
    return {"type": "error", "kind": kind, "message": message}


def start(batch=8, accumulate=8, lr_scale=1.0):
    return {"type": "start", "config": {"batch_size": batch}, "accumulate": accumulate, "lr_scale": lr_scale}


# ----------------------------------------------------------------------------------------- fault injection

def test_fault_spec_parsing_and_once_versus_always():
    from yolotui.engine.train.faults import Fault, FaultInjector, parse_faults

    assert parse_faults("oom@step=5") == [Fault("oom", 5, False)]
    assert parse_faults("crash@step=2:always, nan@step=4") == [Fault("crash", 2, True), Fault("nan", 4, False)]
    for bad in ("oom", "oom@5", "boom@step=1", "oom@step=0", "oom@epoch=1"):
        with pytest.raises(UserError, match="YOLOTUI_FAULT"):
            parse_faults(bad)
    assert FaultInjector(parse_faults("crash@step=2"), attempt=2).active == []
    assert len(FaultInjector(parse_faults("crash@step=2:always"), attempt=3).active) == 1


def test_injected_faults_raise_what_real_failures_raise():
    import torch

    from yolotui.engine.train.failures import classify_exception
    from yolotui.engine.train.faults import FaultInjector, parse_faults

    expected = {"oom": torch.OutOfMemoryError, "comm": ConnectionResetError, "crash": RuntimeError, "data": UserError}
    for kind, exc_type in expected.items():
        injector = FaultInjector(parse_faults(f"{kind}@step=2"), attempt=1)
        injector.before_step()  # step 1: nothing
        with pytest.raises(exc_type) as caught:
            injector.before_step()
        assert classify_exception(caught.value) == kind
    nan = FaultInjector(parse_faults("nan@step=1"), attempt=1)
    nan.before_step()
    assert torch.isnan(nan.loss(torch.tensor(1.0)))


def test_exception_classes_include_wrapped_and_library_errors():
    import torch

    from yolotui.engine.train.failures import NanGuard, NonFiniteLoss, classify_exception, failure_message

    loader_oom = RuntimeError("Caught OutOfMemoryError in DataLoader worker process 0.\nOriginal Traceback ...\n"
                              "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB")
    assert classify_exception(loader_oom) == "oom"
    assert classify_exception(torch.OutOfMemoryError("CUDA out of memory")) == "oom"
    assert classify_exception(RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate")) == "oom"
    assert classify_exception(torch.distributed.DistBackendError("NCCL communicator was aborted")) == "comm"
    assert classify_exception(RuntimeError("[Rank 0] Watchdog caught collective operation timeout: ...")) == "comm"
    assert classify_exception(RuntimeError("[../gloo/transport/tcp/pair.cc:534] Connection closed by peer")) == "comm"
    try:
        try:
            raise ConnectionResetError(104, "Connection reset by peer")
        except ConnectionResetError as inner:
            raise RuntimeError("all_reduce failed") from inner
    except RuntimeError as outer:
        assert classify_exception(outer) == "comm"
    assert classify_exception(NonFiniteLoss("loss not finite")) == "nan"
    bad = UserError("labels/x.txt line 3: 4 values, expected 5")
    assert classify_exception(bad) == "data" and failure_message(bad, "data") == str(bad)
    wrapped = UserError("Caught UserError in DataLoader worker process 1.\nOriginal Traceback (most recent call "
                        "last):\n  ...\nyolotui.errors.UserError: images/a.jpg: cannot read the image")
    assert classify_exception(wrapped) == "data"
    assert failure_message(wrapped, "data") == "images/a.jpg: cannot read the image"
    assert classify_exception(KeyError("x")) == "crash"

    guard = NanGuard(limit=3)
    assert guard.check(False, "i1") is False and guard.suspect
    assert guard.check(True, "i2") is True and not guard.suspect  # a lone overflow is forgiven
    guard.check(False, "i3")
    guard.check(False, "i4")
    with pytest.raises(NonFiniteLoss, match="3 consecutive"):
        guard.check(False, "i5")


# ---------------------------------------------------------------------------------------------- remedies

def test_oom_halves_batch_doubles_accumulation_and_sets_allocator(monkeypatch):
    monkeypatch.setattr(remedies, "torch_version", lambda: (2, 14))
    decision = decide(record(), ENGINE, [start(8, 8), error("oom", "CUDA out of memory")])
    assert decision.retry and decision.failure_class == "oom"
    assert decision.changes["args"] == {"--batch-size": 4, "--accumulate": 16}
    assert decision.changes["env"]["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert decision.settings["batch_size"] == [8, 4] and decision.settings["accumulate"] == [8, 16]
    argv = command_for_attempt(ENGINE, 2, decision.changes)
    assert argv[-4:] == ["--batch-size", "4", "--accumulate", "16"]
    assert env_for_attempt(ENGINE, decision.changes)["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    # the next oom halves again from what attempt 2 ran with, keeping other allocator options
    config = {**ENGINE, "env": {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128"}}
    again = decide(record(attempt=2, command=argv), config, [start(4, 16), error("oom")])
    assert again.changes["args"] == {"--batch-size": 2, "--accumulate": 32}
    assert again.changes["env"]["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True,max_split_size_mb:128"


def test_oom_below_the_minimum_batch_stops_with_advice():
    config = {**ENGINE, "restart": {**ENGINE["restart"], "min_batch": 4}}
    decision = decide(record(), config, [start(6, 11), error("oom")])
    assert not decision.retry and decision.state == "failed" and decision.failure_class == "oom"
    for hint in ("--img", "smaller model", "expandable_segments:True"):
        assert hint in decision.remedy


def test_comm_backs_off_exponentially_with_nccl_settings(monkeypatch):
    monkeypatch.setattr(remedies, "torch_version", lambda: (2, 14))
    first = decide(record(), ENGINE, [error("comm", "ConnectionResetError: reset")])
    assert first.retry and first.delay_s == 2
    assert first.changes["env"]["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"
    assert first.changes["env"]["TORCH_NCCL_BLOCKING_WAIT"] == "1"
    assert float(first.changes["env"]["YOLOTUI_DDP_TIMEOUT_MIN"]) == 10
    assert decide(record(attempt=3), ENGINE, [error("comm")]).delay_s == 8
    assert remedies.nccl_env_names((2, 1)) == ("NCCL_ASYNC_ERROR_HANDLING", "NCCL_BLOCKING_WAIT")


def test_nan_halves_the_learning_rate_scale(tmp_path):
    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "last.pt.json").write_text('{"epoch": 1, "step": 0, "epochs": 3}')
    decision = decide(record(run_dir=str(tmp_path)), ENGINE, [start(lr_scale=0.5), error("nan")])
    assert decision.retry and decision.changes == {"args": {"--lr-scale": 0.25}}
    assert "(1/3 epochs done)" in decision.remedy and "finite" in decision.remedy


def test_data_is_never_retried_and_crash_stops_at_the_limit():
    data = decide(record(), ENGINE, [error("data", "labels/a.txt line 2: bad row")])
    assert not data.retry and data.failure_class == "data" and "labels/a.txt line 2" in data.message
    assert decide(record(attempt=4), ENGINE, [error("crash")]).retry
    last = decide(record(attempt=5), ENGINE, [error("crash")])
    assert not last.retry and last.state == "failed" and "attempt limit reached (5)" in last.remedy


def test_error_event_comes_before_the_signal_and_killed_is_offered_for_resume():
    killed = decide(record(exit_code=None, exit_signal=signal.SIGKILL), ENGINE, [])
    assert not killed.retry and killed.failure_class == "killed" and "yolotui resume r" in killed.remedy
    # the trainer reported an oom, then died of SIGKILL: the event decides
    oom = decide(record(exit_code=None, exit_signal=signal.SIGKILL), ENGINE, [start(), error("oom")])
    assert oom.retry and oom.failure_class == "oom"


def test_merged_changes_keep_earlier_remedies():
    merged = merge_changes({"args": {"--batch-size": 4}, "env": {"A": "1"}}, {"args": {"--lr-scale": 0.5}})
    assert merged == {"args": {"--batch-size": 4, "--lr-scale": 0.5}, "env": {"A": "1"}}


# ------------------------------------------------------------------------------------------------- logout

def _info(kill, linger, scope, strategy="setsid"):
    return SimpleNamespace(kill_user_processes=kill, linger=linger, scope_usable=scope, scope_error=None if scope
                           else "Failed to connect to bus", user="ada", strategy=strategy)


def test_logout_guard_wraps_in_a_scope_or_warns_with_the_linger_command():
    argv = ["python", "-m", "yolotui.supervisor.process", "/r"]
    wrapped, rec = logout.guard_supervisor(argv, "my run", info=_info(True, True, True, "systemd-run-scope"))
    assert wrapped[:3] == ["systemd-run", "--user", "--scope"] and wrapped[-4:] == argv
    assert rec["applied"] == "systemd-run-scope" and rec["warning"] is None
    assert any(a.startswith("--unit=yolotui-my_run-") for a in wrapped)
    _, rec = logout.guard_supervisor(argv, "r", info=_info(True, False, True, "at-risk"))
    assert rec["applied"] == "systemd-run-scope" and "loginctl enable-linger ada" in rec["warning"]
    plain, rec = logout.guard_supervisor(argv, "r", info=_info(True, False, False, "at-risk"))
    assert plain == argv and rec["applied"] == "setsid" and "`loginctl enable-linger ada`" in rec["warning"]
    plain, rec = logout.guard_supervisor(argv, "r", info=_info(False, False, True))
    assert plain == argv and rec["warning"] is None and "KillUserProcesses=no" in rec["note"]
    assert logout.launch_lines(rec) == [f"logout: {rec['note']}"]


# --------------------------------------------------------------------------------------------- the unit

def test_unit_dry_run_names_the_command_and_user_paths(tmp_path, monkeypatch, yolotui_home, capsys):
    import sys

    from yolotui.commands import service as service_cmd
    from yolotui.placement import service
    from yolotui.placement.launcher import package_root

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    assert service_cmd.run(SimpleNamespace(action="install", dry_run=True)) == 0
    out = capsys.readouterr().out
    unit = tmp_path / "home" / ".config" / "systemd" / "user" / "yolotui-resume.service"
    assert not unit.exists()
    assert f"# {unit} (dry run" in out
    assert f"ExecStart={sys.executable} -m yolotui resume --interrupted" in out
    assert f"Environment=PYTHONPATH={package_root()}" in out
    assert f"Environment=YOLOTUI_HOME={yolotui_home}" in out
    assert "WantedBy=default.target" in out and "KillMode=process" in out
    assert "systemctl --user enable yolotui-resume.service" in out and "loginctl enable-linger" in out
    assert "--restart unless-stopped" in out
    assert service.unit_path() == unit
    # a real install writes the same text there
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    path, text, written = service.install_unit()
    assert written and path == tmp_path / "xdg" / "systemd" / "user" / "yolotui-resume.service"
    assert path.read_text() == text
    assert service._quote("/a b/py%") == '"/a b/py%%"'


def test_relaunch_keeps_the_last_attempt_command_and_remedy_env(tmp_path):
    from yolotui.placement.service import relaunch_plan
    from yolotui.runs.runconfig import write_run_config
    from yolotui.runs.status import RunStatus, write_status

    config = {**ENGINE, "cwd": str(tmp_path), "env": {"A": "1"}, "resume_args": ["--resume"], "options": {"x": 1},
              "restart": {"max_attempts": 4, "backoff_s": 0.5, "backoff_max_s": 60, "min_batch": 2},
              "logout": {"applied": "setsid"}}
    write_run_config(tmp_path, config)
    last_cmd = [*ENGINE["command"], "--resume", "--batch-size", "4", "--resume"]
    write_status(tmp_path, RunStatus(name="r", state="running", attempt=2, attempts=[
        {"attempt": 1, "command": ENGINE["command"]}, {"attempt": 2, "command": last_cmd}],
        remedies=[{"attempt": 2, "changes": {"args": {"--batch-size": 4},
                                              "env": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}}}]))
    plan = relaunch_plan(tmp_path)
    # run.yaml's command with the remedies' checked changes, never status.json's strings
    assert plan["command"] == [*ENGINE["command"], "--batch-size", "4"]
    assert plan["env"] == {"A": "1", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    assert plan["max_attempts"] == 4 and plan["backoff_s"] == 0.5 and plan["restart"]["min_batch"] == 2
    assert plan["extra"]["resume_first"] is True and plan["extra"]["options"] == {"x": 1}
    assert "logout" not in plan["extra"] and plan["extra"]["resumed_after_interrupt"]["previous_attempt"] == 2
    first = command_for_attempt({**config, "command": plan["command"], **plan["extra"]}, 1, {})
    assert first[-1] == "--resume"


def test_without_an_event_the_log_tail_and_self_inflicted_signals_classify():
    official = {"name": "o", "backend": "exec", "command": ["python", "train_dual.py", "--batch", "16"],
                "restart": {"max_attempts": 3, "backoff_s": 1}}
    tail = "epoch 3 ...\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB\n"
    oom = decide(record(command=official["command"], log_tail=tail), official, [])
    assert oom.failure_class == "oom" and oom.changes["args"] == {"--batch": 8} and "--accumulate" not in str(oom)
    assert "CUDA out of memory" in oom.message
    nccl = decide(record(log_tail="[E ProcessGroupNCCL.cpp:563] Watchdog caught collective operation timeout"),
                  official, [])
    assert nccl.failure_class == "comm" and nccl.retry
    segv = decide(record(exit_code=None, exit_signal=signal.SIGSEGV), official, [])
    assert segv.failure_class == "crash" and segv.retry  # a crash inside the process, not a kill from outside


def test_oom_under_ddp_keeps_the_batch_a_multiple_of_the_world_size():
    events = [{**start(12, 5), "world_size": 4}, error("oom")]
    decision = decide(record(), ENGINE, events)
    assert decision.changes["args"] == {"--batch-size": 4, "--accumulate": 15}  # 12 -> 6 -> 4 (x4 ranks)
    assert not decide(record(), ENGINE, [{**start(4, 16), "world_size": 4}, error("oom")]).retry
