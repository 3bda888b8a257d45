"""Notifications from the supervisor: apprise JSON posts to a local HTTP receiver, the command hook,
failures that are counted and never stop the run, and `yolotui notify test`."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml
from runs_helpers import reap_runs, wait_for  # noqa: F401 - reap_runs is an autouse fixture
from test_recovery_runs import train, wait_ended

from yolotui.notify import notifier as notify
from yolotui.notify.redact import target_label
from yolotui.runs.runconfig import read_run_config
from yolotui.runs.status import read_status


class Receiver:
    """A local HTTP server that keeps the JSON bodies posted to it (apprise's json:// posts)."""

    def __init__(self) -> None:
        self.posts: list[dict] = []
        posts = self.posts

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                posts.append(json.loads(self.rfile.read(length) or b"{}"))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *_args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"json://127.0.0.1:{self.server.server_address[1]}/"

    def titles(self) -> list[str]:
        return [p.get("title", "") for p in self.posts]

    def bodies(self, kind: str) -> list[str]:
        return [p.get("message", "") for p in self.posts if p.get("title", "").endswith(f" {kind}")]

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.close()


@pytest.fixture
def env(cli_env):
    return {**cli_env, "YOLOTUI_TORCH_THREADS": "1", "OMP_NUM_THREADS": "1"}


def test_an_injected_oom_says_its_remedy_then_the_run_says_finished(tmp_path, yolotui_cmd, env, receiver):
    run_dir, _ = train(tmp_path, yolotui_cmd, env, "--batch", "8", "--notify", receiver.url, fault="oom@step=2",
                       n_train=16)
    assert read_run_config(run_dir)["notify"] == {"urls": [receiver.url]}
    assert wait_ended(run_dir) == "finished"
    wait_for(lambda: receiver.bodies("finished"), timeout=30)
    (restart,) = receiver.bodies("restart")
    assert restart.startswith("oom: batch 8 -> 4, accumulation x2, ")
    assert "resum" in restart and "retry 2/" in restart
    (finished,) = receiver.bodies("finished")
    assert "finished" in finished and "mAP50-95" in finished
    wait_for(lambda: read_status(run_dir).notifications == {"sent": 2, "failed": 0, "last_error": None},
             timeout=30)


def test_an_always_crashing_run_says_failed_and_why(tmp_path, yolotui_cmd, env, receiver):
    run_dir, _ = train(tmp_path, yolotui_cmd, env, "--max-restarts", "1", "--notify", receiver.url,
                       fault="crash@step=1:always", n_train=4)
    assert wait_ended(run_dir) == "failed"
    wait_for(lambda: receiver.bodies("failed"), timeout=30)
    (failed,) = receiver.bodies("failed")
    assert "failed (crash)" in failed and "RuntimeError: crash injected" in failed
    assert "attempt limit reached (2)" in failed
    assert len(receiver.bodies("restart")) == 1


def _exec(tmp_path, yolotui_cmd, env, code: str, *flags: str, name: str = "x") -> Path:
    argv = [*yolotui_cmd, "exec", "--project", str(tmp_path / "runs"), "--name", name, *flags, "--",
            sys.executable, "-c", code]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return tmp_path / "runs" / name


def test_a_broken_target_is_logged_and_counted_and_the_hook_gets_the_event(tmp_path, yolotui_cmd, env, receiver,
                                                                          yolotui_home):
    hook_out = tmp_path / "hook.json"
    settings = Path(yolotui_home) / "config" / "settings.yaml"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(yaml.safe_dump({"notify": {
        "urls": ["json://127.0.0.1:9/", receiver.url],  # port 9 (discard): nothing listens, the post fails
        "command": f"cat > {hook_out}", "timeout_s": 5}}))
    run_dir = _exec(tmp_path, yolotui_cmd, env, "print('hello')")
    assert wait_ended(run_dir) == "finished"
    status = wait_for(lambda: (s := read_status(run_dir)) and s.notifications and s, timeout=30)
    assert status.notifications["failed"] == 1 and status.notifications["sent"] == 0
    assert "finished" in status.notifications["last_error"]
    assert f"notify: finished: {target_label('json://127.0.0.1:9/')}: " in (run_dir / "supervisor.log").read_text()
    event = json.loads(hook_out.read_text())
    assert event["event"] == "finished" and event["run"] == "x" and event["run_dir"] == str(run_dir)
    assert receiver.bodies("finished")  # the working URL got it although another target failed


def test_notify_test_sends_to_every_target_and_names_the_failing_one(tmp_path, yolotui_cmd, env, receiver):
    done = subprocess.run([*yolotui_cmd, "notify", "test", "--notify", receiver.url], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "sent to 1 of 1 target(s)" in done.stdout
    assert receiver.titles() == ["yolotui: test test"]
    done = subprocess.run([*yolotui_cmd, "notify", "test", "--notify", "json://127.0.0.1:9/", "--notify",
                           receiver.url], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and f"failed: {target_label('json://127.0.0.1:9/')}: " in done.stdout
    assert "sent to 1 of 2 target(s)" in done.stdout
    done = subprocess.run([*yolotui_cmd, "notify", "test"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "no notification targets" in done.stderr


def test_targets_add_up_and_restart_text_names_the_remedy():
    targets = notify.targets_for({"notify": {"urls": ["b://x", "a://y"]}},
                                 {"notify": {"urls": ["a://y"], "command": "cat", "best": True}})
    assert targets.urls == ["a://y", "b://x"] and targets.command == "cat" and targets.best
    assert not notify.targets_for({}, {})
    text = notify.restart_text("oom", {"batch_size": [16, 8], "accumulate": [4, 8]}, {"epoch": 37, "step": 120},
                               "")
    assert text == "oom: batch 16 -> 8, accumulation x2, resuming at epoch 37 batch 120"
    text = notify.restart_text("host-oom", {"workers": [8, 4], "cache": ["ram", None]}, None, "")
    assert text == "host-oom: workers 8 -> 4, no --cache ram, restarting from the start (no checkpoint yet)"


def test_final_and_best_texts():
    done = [{"type": "done", "metrics": {"mAP50": 0.5, "mAP50-95": 0.25}}]
    event = notify.final_event("r", "/runs/r", "finished", "finished (exit code 0)", None, "", 2, done)
    assert event["title"] == "yolotui: r finished"
    assert event["body"] == "finished (exit code 0); mAP50 0.5000, mAP50-95 0.2500"
    failed = notify.final_event("r", "/runs/r", "failed", "exit code 1: RuntimeError: x", "crash",
                                "not retried: attempt limit reached (5)", 5, [])
    assert failed["body"] == "failed (crash): exit code 1: RuntimeError: x; not retried: attempt limit reached (5)"
    best = notify.best_event("r", "/runs/r", {"epoch": 4, "epochs": 10, "metrics": {"mAP50": 0.6, "mAP50-95": 0.3}})
    assert best["event"] == "best" and best["body"] == "new best at epoch 5/10: mAP50 0.6000, mAP50-95 0.3000"
    quiet = notify.Notifier(notify.Targets(urls=["json://127.0.0.1:9/"], best=False))
    quiet.send(best)  # best events are off unless asked for: no sender starts
    assert quiet.children == {}
