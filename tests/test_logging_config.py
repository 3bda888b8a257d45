"""Logging the way users configure it: a dictConfig YAML with a DEBUG file handler gets the trainer's and
the supervisor's DEBUG records across a kill and an automatic retry; a bad YAML is refused before detaching; a
comm failure's retry runs with NCCL_DEBUG=INFO and TORCH_DISTRIBUTED_DEBUG=DETAIL; `logs --level` filters."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from runs_helpers import reap_runs  # noqa: F401 - reap_runs is an autouse fixture
from test_recovery_runs import train, wait_ended

from yolotui import logconfig
from yolotui.errors import UserError
from yolotui.runs.runconfig import read_run_config
from yolotui.runs.status import read_status

DEBUG_FILE_CONFIG = {
    "version": 1,
    "formatters": {"detailed": {"format": "%(levelname)s %(name)s %(process)d %(message)s"}},
    "handlers": {"debugfile": {"class": "logging.FileHandler", "filename": "debug.log", "level": "DEBUG",
                               "formatter": "detailed"},
                 "console": {"class": "logging.StreamHandler", "stream": "ext://sys.stdout", "level": "WARNING"}},
    "root": {"level": "WARNING", "handlers": ["debugfile"]},
}


@pytest.fixture
def env(cli_env):
    return {**cli_env, "YOLOTUI_TORCH_THREADS": "1", "OMP_NUM_THREADS": "1"}


def test_a_debug_file_handler_gets_both_processes_records_across_a_kill_and_a_retry(tmp_path, yolotui_cmd, env,
                                                                                    yolotui_home):
    settings = Path(yolotui_home) / "config" / "settings.yaml"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(yaml.safe_dump({"watchdog": {"checkpoint_wait_s": 1, "term_grace_s": 1}}))
    config = tmp_path / "conf" / "logging.yaml"
    config.parent.mkdir()
    config.write_text(yaml.safe_dump(DEBUG_FILE_CONFIG))
    run_dir, _ = train(tmp_path, yolotui_cmd, env, "--log-config", str(config), "--stall-timeout", "4",
                       fault="hang@step=3", n_train=16)
    recorded = read_run_config(run_dir)["logging"]
    assert recorded["config_file"] == str(config)
    assert recorded["config"]["handlers"]["debugfile"]["filename"] == str(tmp_path / "conf" / "debug.log")
    assert wait_ended(run_dir) == "finished"
    status = read_status(run_dir)
    assert [a["failure_class"] for a in status.attempts] == ["hang", None]  # SIGKILLed by the watchdog, retried
    lines = (tmp_path / "conf" / "debug.log").read_text().splitlines()
    trainer_debug = [line for line in lines if line.startswith("DEBUG yolotui.data ")]
    assert len({line.split()[2] for line in trainer_debug}) == 2  # both attempts' trainer processes
    assert any(line.startswith("DEBUG yolotui.trainer ") and "checkpoint last.pt" in line for line in lines)
    assert any(line.startswith("DEBUG yolotui.supervisor ") and "attempt 2: environment additions" in line
               for line in lines)
    assert any(line.startswith("INFO yolotui.supervisor ") and "stall watchdog" in line for line in lines)
    train_log = (run_dir / "train.log").read_text()
    assert "epoch 1/1 batch" in train_log and "DEBUG" not in train_log  # train.log as it always was
    supervisor_log = (run_dir / "supervisor.log").read_text()
    assert "] attempt 2: started pid" in supervisor_log and "environment additions" not in supervisor_log


def test_a_bad_logging_yaml_is_refused_before_anything_detaches(tmp_path, yolotui_cmd, env):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"version": 1, "handlers": {
        "f": {"class": "logging.FileHandler", "filname": "x.log"}}}))
    argv = [*yolotui_cmd, "train", "--data", "nowhere.yaml", "--project", str(tmp_path / "runs"), "--name", "r",
            "--log-config", str(bad)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    message = done.stderr.strip()
    assert len(message.splitlines()) == 1 and "Traceback" not in done.stderr
    assert f"--log-config {bad}: handlers.f: unknown key 'filname' for FileHandler" in message
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("config", "expected"), [
    ({"version": 2}, "key 'version' must be 1"),
    ({"version": 1, "handler": {}}, "unknown key 'handler'"),
    ({"version": 1, "handlers": {"h": {"class": "logging.StreamHandler", "formatter": "nope"}}},
     "handlers.h: formatter 'nope' is not defined"),
    ({"version": 1, "root": {"level": "LOUD"}}, "root: level 'LOUD' is not one of"),
    ({"version": 1, "loggers": {"yolotui": {"handlers": ["missing"]}}}, "loggers.yolotui: handler 'missing'"),
    ({"version": 1, "handlers": {"h": {"class": "no.such.Handler"}}}, "class 'no.such.Handler' cannot be imported"),
])
def test_validation_names_the_bad_key(tmp_path, config, expected):
    path = tmp_path / "log.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(UserError) as caught:
        logconfig.load(path)
    assert str(caught.value).startswith(f"--log-config {path}: ") and expected in str(caught.value)


NCCL_FLAKY = ("import os, sys\n"
              "if os.environ['YOLOTUI_ATTEMPT'] == '1':\n"
              "    print('RuntimeError: NCCL error: unhandled system error, Connection reset by peer', flush=True)\n"
              "    sys.exit(1)\n"
              "print('debug', os.environ.get('NCCL_DEBUG'), os.environ.get('TORCH_DISTRIBUTED_DEBUG'), flush=True)\n")


def test_a_comm_failures_retry_carries_the_nccl_debug_settings(tmp_path, yolotui_cmd, cli_env):
    script = tmp_path / "flaky.py"
    script.write_text(NCCL_FLAKY)
    argv = [*yolotui_cmd, "exec", "--project", str(tmp_path / "runs"), "--name", "c", "--max-restarts", "1", "--",
            sys.executable, str(script)]
    subprocess.run(argv, env=cli_env, check=True, capture_output=True, timeout=60)
    run_dir = tmp_path / "runs" / "c"
    assert wait_ended(run_dir, timeout=60) == "finished"
    assert "debug INFO DETAIL" in (run_dir / "train.log").read_text()
    first = read_status(run_dir).attempts[0]
    assert first["failure_class"] == "comm" and "NCCL_DEBUG=INFO and TORCH_DISTRIBUTED_DEBUG=DETAIL" in first["remedy"]
    assert first["settings"]["TORCH_DISTRIBUTED_DEBUG"] == [None, "DETAIL"]
    shown = subprocess.run([*yolotui_cmd, "status", str(run_dir)], env=cli_env, capture_output=True, text=True,
                           timeout=60).stdout
    assert "debug      NCCL_DEBUG=INFO TORCH_DISTRIBUTED_DEBUG=DETAIL (set after a comm failure" in shown


def test_logs_level_keeps_the_lines_at_that_level_or_above(tmp_path, yolotui_cmd, cli_env):
    run_dir = tmp_path / "runs" / "l"
    run_dir.mkdir(parents=True)
    (run_dir / "run.yaml").write_text(yaml.safe_dump({"name": "l", "command": ["true"]}))
    (run_dir / "train.log").write_text(
        "===== yolotui: attempt 1/1 started =====\n"
        "epoch 1/3 batch 1/4 box=1.0\n"
        "DEBUG: checkpoint last.pt: epoch 0 batch 2\n"
        "host:1:2 [0] NCCL INFO Bootstrap : Using eth0\n"
        "WARNING: BatchNorm recalibration skipped: too few images\n"
        "Traceback (most recent call last):\n"
        "  File \"x.py\", line 1, in <module>\n"
        "RuntimeError: boom\n")

    def logs(*flags):
        done = subprocess.run([*yolotui_cmd, "logs", str(run_dir), *flags], env=cli_env, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    assert len(logs()) == 8
    assert logs("--level", "WARNING") == [
        "===== yolotui: attempt 1/1 started =====", "WARNING: BatchNorm recalibration skipped: too few images",
        "Traceback (most recent call last):", "  File \"x.py\", line 1, in <module>", "RuntimeError: boom"]
    assert len(logs("--level", "info")) == 6  # without the DEBUG record and NCCL's INFO chatter


def test_a_stdout_handler_of_the_users_replaces_the_default_one(capsys):
    import logging

    config = {"version": 1, "formatters": {"f": {"format": "%(levelname)s|%(name)s|%(message)s"}},
              "handlers": {"console": {"class": "logging.StreamHandler", "stream": "ext://sys.stdout",
                                       "formatter": "f", "level": "DEBUG"}},
              "root": {"level": "DEBUG", "handlers": ["console"]}}
    try:
        logconfig.apply({"config": config, "level": "INFO"}, "trainer")
        logging.getLogger("yolotui.trainer").debug("one line")
        assert capsys.readouterr().out == "DEBUG|yolotui.trainer|one line\n"  # once, in the user's format
        logconfig.apply(None, "trainer")
        logging.getLogger("yolotui.trainer").info("plain")
        logging.getLogger("yolotui.trainer").debug("hidden")
        logging.getLogger("yolotui.trainer").warning("careful")
        out = capsys.readouterr().out
        assert "plain\n" in out and "WARNING: careful\n" in out and "hidden" not in out
    finally:
        logging.root.handlers.clear()
        logging.getLogger("yolotui").handlers.clear()
