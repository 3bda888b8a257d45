"""A mirror target that fails (unwritable, full, slow) never stops training: the run finishes, every checkpoint is
written, and the failure is reported in status.json's `mirror`, `yolotui status` and a `mirror` notification.
Also: a working mirror through `yolotui exec --mirror`, settings.yaml's default mirror and `--mirror none`."""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest
from runs_helpers import reap_runs  # noqa: F401 - reap_runs is an autouse fixture
from spotkit import cli, exec_checkpointer, notifications, notify_hook, wait_until, write_settings
from syspkg import needs

from yolotui import procs
from yolotui.mirror.snapshot import read_manifest, sha256_file
from yolotui.runs import lock
from yolotui.runs.layout import ENDED_STATES
from yolotui.runs.runconfig import read_run_config
from yolotui.runs.status import effective_state, read_status

FAST = {"retry_s": 0.3, "backoff_s": 0.1, "tries": 2}


def _ended(run_dir: Path, timeout: float = 90) -> str:
    state = wait_until(lambda: effective_state(run_dir) if effective_state(run_dir) in ENDED_STATES else None,
                       timeout, f"{run_dir.name} to end")
    wait_until(lambda: not lock.is_held(run_dir), 60, f"the supervisor of {run_dir.name} to exit")
    return state


def _assert_trained_through(run_dir: Path, steps: int) -> None:
    manifest = read_manifest(run_dir / "weights" / "last.pt.json")[0]
    assert manifest["step"] == steps and sha256_file(run_dir / "weights" / "last.pt") == manifest["sha256"]


def _mirror_failures(status_path_notes: Path) -> list[dict]:
    return [n for n in notifications(status_path_notes) if n.get("event") == "mirror"]


def test_a_working_mirror_through_exec_and_the_status_line(tmp_path, cli_env, yolotui_home):
    run_dir = exec_checkpointer(cli_env, tmp_path / "runs", "ok", "--mirror", str(tmp_path / "m"), count=4)
    assert _ended(run_dir) == "finished"
    status = read_status(run_dir)
    assert status.mirror["state"] == "ok" and status.mirror["copies"] >= 1 and status.mirror["failures"] == 0
    assert sha256_file(tmp_path / "m" / "ok" / "weights" / "last.pt") == sha256_file(run_dir / "weights" / "last.pt")
    assert read_run_config(run_dir)["mirror"] == {"target": str(tmp_path / "m")}
    shown = cli(cli_env, "status", str(run_dir)).stdout
    assert "mirror     ok, last copy" in shown and str(tmp_path / "m") in shown


def test_settings_default_mirror_and_mirror_none(tmp_path, cli_env, yolotui_home):
    write_settings(yolotui_home, {"mirror": {"target": str(tmp_path / "default"), **FAST}})
    mirrored = exec_checkpointer(cli_env, tmp_path / "runs", "a", count=2)
    plain = exec_checkpointer(cli_env, tmp_path / "runs", "b", "--mirror", "none", count=2)
    assert _ended(mirrored) == "finished" and _ended(plain) == "finished"
    assert read_status(mirrored).mirror["target"] == str(tmp_path / "default")
    assert (tmp_path / "default" / "a" / "weights" / "last.pt").is_file()
    assert read_status(plain).mirror is None and not (tmp_path / "default" / "b").exists()
    write_settings(yolotui_home, {"mirror": {"target": str(tmp_path / "default"), "tries": "many"}})
    refused = cli(cli_env, "exec", "--project", str(tmp_path / "runs"), "--name", "c", "--", "true")
    assert refused.returncode != 0 and "mirror.tries" in refused.stderr and "settings.yaml" in refused.stderr


def test_an_unwritable_target_never_stops_training(tmp_path, cli_env, yolotui_home):
    (tmp_path / "a-file").write_text("not a folder")
    hook = tmp_path / "notified.jsonl"
    write_settings(yolotui_home, {"mirror": FAST, "notify": notify_hook(hook)})
    run_dir = exec_checkpointer(cli_env, tmp_path / "runs", "unwritable", "--mirror",
                                str(tmp_path / "a-file" / "mirror"), count=6)
    assert _ended(run_dir) == "finished"
    _assert_trained_through(run_dir, 6)
    mirror = read_status(run_dir).mirror
    assert mirror["state"] == "failing" and mirror["failures"] >= 2 and "Not a directory" in mirror["last_error"]
    wait_until(lambda: _mirror_failures(hook), 30, "the mirror notification")
    failures = _mirror_failures(hook)
    assert len(failures) == 1 and "training goes on" in failures[0]["body"]  # once per streak, not per try
    assert "mirror     failing" in cli(cli_env, "status", str(run_dir)).stdout


def _mount_full_disk(folder: Path) -> bool:
    """A 64 KiB tmpfs at `folder`; False where this machine may not mount (then the write fault stands in)."""
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True,
                          timeout=30)
    return done.returncode == 0


def test_a_full_target_never_stops_training(tmp_path, cli_env, yolotui_home):
    full = tmp_path / "full"
    mounted = _mount_full_disk(full)
    env = cli_env if mounted else {**cli_env, "YOLOTUI_MIRROR_FAULT": "full"}
    write_settings(yolotui_home, {"mirror": FAST})
    try:
        run_dir = exec_checkpointer(env, tmp_path / "runs", "full", "--mirror", str(full), size=200_000, count=5)
        assert _ended(run_dir) == "finished"
        _assert_trained_through(run_dir, 5)
        mirror = read_status(run_dir).mirror
        assert mirror["state"] == "failing" and "No space left on device" in mirror["last_error"]
        if mounted:
            leftovers = [p for p in full.rglob("*") if p.is_file() and p.name.endswith(".tmp")]
            assert leftovers == []  # a write cut short by the full disk leaves no temporary behind
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(full)], capture_output=True, timeout=30)


@needs("rsync")  # the slow host is an rsync target (its ssh a stand-in that never answers)
def test_a_slow_target_never_stops_training_and_the_end_is_bounded(tmp_path, cli_env, yolotui_home):
    slow_ssh = tmp_path / "slow-ssh"
    slow_ssh.write_text("#!/bin/sh\nexec sleep 287.25\n")  # a remote host that never answers
    os.chmod(slow_ssh, 0o755)
    hook = tmp_path / "notified.jsonl"
    write_settings(yolotui_home, {"mirror": {**FAST, "slow_s": 0.5, "timeout_s": 2.0, "flush_s": 1.5},
                                  "notify": notify_hook(hook)})
    env = {**cli_env, "RSYNC_RSH": shlex.quote(str(slow_ssh))}
    run_dir = exec_checkpointer(env, tmp_path / "runs", "slow", "--mirror", "backup-host:mirror", count=8)
    wait_until(lambda: read_status(run_dir).mirror and read_status(run_dir).mirror.get("slow"), 60,
               "the slow copy to be reported")
    state = wait_until(lambda: effective_state(run_dir) if effective_state(run_dir) in ENDED_STATES else None, 90,
                       "the run to end")
    ended = time.monotonic()
    wait_until(lambda: not lock.is_held(run_dir), 30, "the supervisor to exit")
    assert time.monotonic() - ended < 15  # the last copy waited flush_s, not for the host
    assert state == "finished"
    _assert_trained_through(run_dir, 8)
    mirror = read_status(run_dir).mirror
    assert mirror["state"] == "failing" and ("longer than" in mirror["last_error"]
                                             or "did not finish" in mirror["last_error"])
    wait_until(lambda: any("is slow" in n["body"] for n in _mirror_failures(hook)), 30, "the slow notification")
    wait_until(lambda: not _stuck_ssh(), 10, "the stuck ssh to go with its copy")


def _stuck_ssh() -> list[int]:
    """Live processes of the slow ssh stand-in."""
    return [int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit() and procs.is_alive(int(e.name))
            and procs.cmdline(int(e.name)) == ["sleep", "287.25"]]


@pytest.mark.parametrize("flag", ["--mirror", "--preempt-url"])
def test_bad_spot_flags_are_refused_before_anything_starts(tmp_path, cli_env, flag):
    value = "memory://x" if flag == "--mirror" else "http://8.8.8.8/notice"
    done = cli(cli_env, "exec", "--project", str(tmp_path / "runs"), "--name", "x", flag, value, "--", "true")
    assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1
    assert flag in done.stderr and not (tmp_path / "runs" / "x").exists()


def test_attach_returns_only_after_the_last_mirror_copy(tmp_path):
    import io
    import threading

    from yolotui.commands._progress import wait_for_last_mirror_copy
    from yolotui.runs.status import RunStatus, write_status

    run_dir = tmp_path / "exp"
    run_dir.mkdir()
    write_status(run_dir, RunStatus(name="exp", state="finished", mirror={"target": "s3://b/r", "state": "copying"}))
    fd = lock.claim(run_dir, "a supervisor making its last copy")

    def last_copy_done():
        write_status(run_dir, RunStatus(name="exp", state="finished", mirror={"target": "s3://b/r", "state": "ok",
                                                                              "last_ok": time.time()}))
        lock.release(fd)

    timer = threading.Timer(0.5, last_copy_done)
    timer.start()
    out = io.StringIO()
    started = time.monotonic()
    wait_for_last_mirror_copy(run_dir, out)
    assert time.monotonic() - started >= 0.4 and not lock.is_held(run_dir)
    assert "waiting for the last mirror copy" in out.getvalue() and "mirror: ok, last copy" in out.getvalue()
    timer.join()
