"""Preemption: the `--preempt-url` notice (a small HTTP server on 127.0.0.1 stands in for the metadata service), a
SIGTERM to the supervisor from outside, class `preempted` in the policy, and `resume --interrupted` taking
preempted runs first."""

from __future__ import annotations

import json
import os
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from runs_helpers import reap_runs  # noqa: F401 - reap_runs is an autouse fixture
from spotkit import cli, exec_checkpointer, wait_until, write_settings

from yolotui.errors import UserError
from yolotui.mirror.snapshot import read_manifest, sha256_file
from yolotui.placement.preempt import check_url, notice_in, poll_once
from yolotui.runs import lock
from yolotui.runs.layout import ENDED_STATES
from yolotui.runs.status import effective_state, read_status
from yolotui.supervisor.policy import decide


class Metadata:
    """A metadata service on 127.0.0.1: 404 until `preempt()`, then 200 with AWS's instance-action JSON.
    With `token=True` it wants IMDSv2's session token (401 without it)."""

    def __init__(self, token: bool = False) -> None:
        self.notice = False
        self.token = token
        self.asked = 0
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_PUT(self):
                body = b"tok-123" if self.path == "/latest/api/token" else b""
                self.send_response(200 if body else 404)
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                service.asked += 1
                if service.token and self.headers.get("X-aws-ec2-metadata-token") != "tok-123":
                    self.send_response(401)
                    self.end_headers()
                    return
                if not service.notice:
                    self.send_response(404)
                    self.end_headers()
                    return
                body = json.dumps({"action": "terminate", "time": "2030-01-01T00:02:00Z"}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/latest/meta-data/spot/instance-action"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def preempt(self) -> None:
        self.notice = True

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def metadata():
    service = Metadata()
    yield service
    service.close()


# ------------------------------------------------------------------------------------------------- units

@pytest.mark.parametrize("status, body, notice", [
    (404, b"", False), (200, b"FALSE", False), (200, b"TRUE", True), (200, b"", False), (0, b"", False),
    (200, b'{"action": "terminate", "time": "2030-01-01T00:02:00Z"}', True),
    (200, b'{"DocumentIncarnation": 3, "Events": []}', False),
    (200, b'{"Events": [{"EventType": "Preempt", "NotBefore": "soon"}]}', True),
    (200, b'{"Events": [{"EventType": "Freeze"}]}', False),
])
def test_what_counts_as_a_notice(status, body, notice):
    assert (notice_in(status, body) is not None) is notice


def test_the_url_must_be_local_http():
    for good in ("http://169.254.169.254/latest/meta-data/spot/instance-action", "http://127.0.0.1:8080/x",
                 "http://metadata.google.internal/computeMetadata/v1/instance/preempted", "http://10.0.0.5/n"):
        assert check_url(good) == good
    for bad in ("http://8.8.8.8/x", "ftp://127.0.0.1/x", "169.254.169.254", ""):
        with pytest.raises(UserError) as caught:
            check_url(bad)
        assert "--preempt-url" in str(caught.value) and "\n" not in str(caught.value)


def test_polling_a_service_that_wants_an_imdsv2_token():
    service = Metadata(token=True)
    try:
        assert poll_once(service.url) is None
        service.preempt()
        assert "terminate" in poll_once(service.url)
    finally:
        service.close()
    assert poll_once(service.url) is None  # no answer at all is no notice


def test_policy_a_preemption_is_interrupted_not_stopped_or_killed():
    record = {"attempt": 1, "exit_code": 0, "exit_signal": None, "stop_requested": True, "signals_sent": [15],
              "preempted": "the machine's preemption notice", "name": "exp"}
    decision = decide(record, {"command": ["x"], "restart": {"max_attempts": 3}}, [{"type": "stop"}])
    assert (decision.retry, decision.state, decision.failure_class) == (False, "interrupted", "preempted")
    assert "yolotui resume exp" in decision.remedy and "restore" in decision.remedy


# ------------------------------------------------------------------------------------------------- runs

def _ended(run_dir: Path) -> str:
    state = wait_until(lambda: effective_state(run_dir) if effective_state(run_dir) in ENDED_STATES else None,
                       90, f"{run_dir.name} to end")
    wait_until(lambda: not lock.is_held(run_dir), 60, f"the supervisor of {run_dir.name} to exit")
    return state


def test_a_preemption_notice_checkpoints_mirrors_and_ends_interrupted(tmp_path, cli_env, yolotui_home, metadata):
    write_settings(yolotui_home, {"preempt": {"every_s": 0.2}})
    run_dir = exec_checkpointer(cli_env, tmp_path / "runs", "spot", "--preempt-url", metadata.url,
                                "--mirror", str(tmp_path / "bucket"), period=0.3, count=400)
    wait_until(lambda: metadata.asked >= 2, 60, "the watcher to poll the metadata service")
    wait_until(lambda: (run_dir / "weights" / "last.pt.json").exists(), 60, "a first checkpoint")
    metadata.preempt()
    assert _ended(run_dir) == "interrupted"
    status = read_status(run_dir)
    assert status.failure_class == "preempted" and "notice" in status.stop["by"]
    assert "terminate" in status.stop["preempted"] and status.attempts[-1]["failure_class"] == "preempted"
    manifest = read_manifest(run_dir / "weights" / "last.pt.json")[0]
    assert manifest["note"] == "on SIGTERM"  # the stand-in checkpointed when the supervisor stopped it
    mirrored = tmp_path / "bucket" / "spot" / "weights"
    assert sha256_file(mirrored / "last.pt") == manifest["sha256"] == read_manifest(mirrored / "last.pt.json")[0]["sha256"]
    shown = cli(cli_env, "status", str(run_dir)).stdout
    assert "interrupted" in shown and "preempted" in shown


def test_resume_interrupted_takes_preempted_runs_first(tmp_path, cli_env):
    preempted = exec_checkpointer(cli_env, tmp_path / "runs", "first", period=0.3, count=400)
    killed = exec_checkpointer(cli_env, tmp_path / "runs", "second", period=0.3, count=400)
    for run_dir in (preempted, killed):
        wait_until(lambda run_dir=run_dir: (run_dir / "weights" / "last.pt.json").exists(), 60, "a checkpoint")
    os.kill(read_status(preempted).supervisor_pid, signal.SIGTERM)  # a shutdown reaching the supervisor
    os.kill(read_status(killed).supervisor_pid, signal.SIGKILL)  # gone without a word
    assert _ended(preempted) == "interrupted" and read_status(preempted).failure_class == "preempted"
    assert _ended(killed) == "interrupted" and read_status(killed).failure_class is None
    done = cli(cli_env, "resume", "--interrupted")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("resumed")]
    assert [line.split()[1] for line in lines] == ["first", "second"]  # the index lists "second" first
    for run_dir in (preempted, killed):
        wait_until(lambda run_dir=run_dir: effective_state(run_dir) == "running", 60, "the relaunch")
        assert cli(cli_env, "stop", str(run_dir), "--force").returncode == 0


def test_a_slurm_jobs_sigterm_keeps_slurms_own_rule():
    from yolotui.supervisor.process import Supervisor
    from yolotui.supervisor.slurm_job import SlurmSupervisor

    assert Supervisor.sigterm_is_preemption and not SlurmSupervisor.sigterm_is_preemption
    assert SlurmSupervisor.preemption_of(SlurmSupervisor.__new__(SlurmSupervisor), signal.SIGTERM) is None
    assert "SIGTERM" in Supervisor.preemption_of(Supervisor.__new__(Supervisor), signal.SIGTERM)
    assert Supervisor.preemption_of(Supervisor.__new__(Supervisor), signal.SIGINT) is None
