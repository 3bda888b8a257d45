"""Queued runs: conditions (--after, --after-ok, --when-free) with a fake NVML, and their order end to end.

The end-to-end tests start real detached supervisors (exec runs whose command waits for a file the test
creates) and a fake `pynvml` module put first on the supervisors' PYTHONPATH, scripted through a JSON file.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from runs_helpers import reap_runs, wait_for  # noqa: F401  (reap_runs is an autouse fixture)
from test_telemetry_gpu import FakeNVML
from tui_fixtures import make_run

from yolotui.errors import UserError
from yolotui.placement import queue
from yolotui.placement.launcher import launch
from yolotui.runs import lock
from yolotui.runs.status import effective_state, read_status
from yolotui.runs.store import create_run_dir
from yolotui.supervisor.control import stop
from yolotui.telemetry.gpu import GpuSampler

PY = sys.executable
GIB = 1024


# ------------------------------------------------------------------------------------------- the conditions

def test_parsing_and_spec():
    assert queue.parse_memory("20G") == 20 * GIB and queue.parse_memory("512M") == 512
    assert queue.parse_memory("1.5GiB") == 1536 and queue.parse_memory("8") == 8 * GIB
    with pytest.raises(UserError, match="--when-free"):
        queue.parse_memory("lots")
    assert queue.gpu_indices("0,1") == [0, 1] and queue.gpu_indices("cuda:1") == [1] and queue.gpu_indices("") == [0]
    with pytest.raises(UserError, match="cpu"):
        queue.gpu_indices("cpu")
    assert queue.make_spec() is None
    with pytest.raises(UserError, match="--after RUN"):
        queue.make_spec(after_ok=True)
    spec = queue.make_spec(after=Path("/r/exp1"), after_ok=True, when_free="20G", device="0,1")
    assert spec["when_free"] == {"gpus": [0, 1], "mem_mib": 20 * GIB}
    assert queue.describe(spec) == "after exp1 succeeds, GPU 0,1 20 GiB free"


def fake_sampler(used_mib=(0,), total_mib=80 * GIB, procs=None):
    gpus = [{"name": "H100", "temp": 40, "mem": (used, total_mib), "util": 0, "power_mw": 1, "limit_mw": 1,
             "fan": 0, "procs": (procs or {}).get(i, [])} for i, used in enumerate(used_mib)]
    return GpuSampler(nvml=FakeNVML(gpus))


def test_after_waits_for_the_end_and_after_ok_for_success(tmp_path):
    me = tmp_path / "runs" / "me"
    me.mkdir(parents=True)
    running = make_run(tmp_path / "runs", "first", state="running", hold_lock=True)
    verdict = queue.check({"after": str(running.path)}, me, 0.0, fake_sampler())
    assert not verdict.ready and verdict.waiting_on == "after" and "first" in verdict.reason
    running.release()  # supervisor gone: interrupted, will be resumed, so not ended
    assert not queue.check({"after": str(running.path)}, me, 0.0, fake_sampler()).ready
    done = make_run(tmp_path / "runs", "done", state="finished")
    failed = make_run(tmp_path / "runs", "broke", state="failed")
    assert queue.check({"after": str(done.path), "after_ok": True}, me, 0.0, fake_sampler()).ready
    assert queue.check({"after": str(failed.path)}, me, 0.0, fake_sampler()).ready
    never = queue.check({"after": str(failed.path), "after_ok": True}, me, 0.0, fake_sampler())
    assert never.impossible and "--after-ok" in never.reason


def test_when_free_memory_idle_and_yolotui_holders(tmp_path):
    me = tmp_path / "runs" / "me"
    me.mkdir(parents=True)
    want_20g = {"when_free": {"gpus": [1], "mem_mib": 20 * GIB}}
    busy = fake_sampler(used_mib=(0, 70 * GIB))
    verdict = queue.check(want_20g, me, 0.0, busy)
    assert not verdict.ready and verdict.waiting_on == "gpu" and "10.0 of 20 GiB free" in verdict.reason
    assert queue.check(want_20g, me, 0.0, fake_sampler(used_mib=(0, 50 * GIB))).ready
    idle = {"when_free": {"gpus": [0], "mem_mib": None}}
    assert not queue.check(idle, me, 0.0, fake_sampler(procs={0: [(4242, 100)]})).ready
    assert queue.check(idle, me, 0.0, fake_sampler()).ready
    assert queue.check({"when_free": {"gpus": [3], "mem_mib": None}}, me, 0.0, fake_sampler()).impossible
    holder = make_run(tmp_path / "runs", "holder", state="running", hold_lock=True, device="cuda:0")
    held = queue.check(idle, me, 0.0, fake_sampler())
    assert not held.ready and "held by yolotui run holder" in held.reason
    holder.release()
    assert queue.check(idle, me, 0.0, fake_sampler()).ready


# ------------------------------------------------------------------------------------------ end to end

WAIT_FOR_FILE = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.05)\n"

FAKE_PYNVML = textwrap.dedent('''
    """A fake pynvml for the queue tests: GPUs scripted by the JSON file next to this module."""
    import json, os
    from types import SimpleNamespace

    class NVMLError(Exception):
        def __init__(self, value=999):
            super().__init__(f"NVML error {value}")
            self.value = value

    NVML_TEMPERATURE_GPU = 0
    _STATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpus.json")

    def _gpus():
        with open(_STATE) as handle:
            return json.load(handle)

    def nvmlInit(): pass
    def nvmlShutdown(): pass
    def nvmlDeviceGetCount(): return len(_gpus())
    def nvmlDeviceGetHandleByIndex(index): return index
    def nvmlDeviceGetName(h): return "Fake GPU"
    def nvmlDeviceGetMemoryInfo(h):
        gpu = _gpus()[h]
        mib = 2 ** 20
        return SimpleNamespace(used=gpu["used"] * mib, total=gpu["total"] * mib, free=(gpu["total"] - gpu["used"]) * mib)
    def nvmlDeviceGetComputeRunningProcesses(h): return []
    def nvmlDeviceGetGraphicsRunningProcesses(h): return []
    def _unsupported(*args): raise NVMLError(3)
    nvmlDeviceGetTemperature = nvmlDeviceGetUtilizationRates = nvmlDeviceGetPowerUsage = _unsupported
    nvmlDeviceGetEnforcedPowerLimit = nvmlDeviceGetFanSpeed = _unsupported
''')


@pytest.fixture
def fake_gpus(tmp_path, monkeypatch):
    """One 80 GiB fake GPU for every supervisor started by the test; returns a setter of its used memory."""
    folder = tmp_path / "fake_nvml"
    folder.mkdir()
    (folder / "pynvml.py").write_text(FAKE_PYNVML)

    def set_used(mib: int) -> None:
        tmp = folder / "gpus.json.tmp"
        tmp.write_text(json.dumps([{"used": mib, "total": 80 * GIB}]))
        tmp.replace(folder / "gpus.json")

    set_used(0)
    monkeypatch.setenv("PYTHONPATH", f"{folder}:{Path(__file__).resolve().parent.parent}")
    monkeypatch.setenv("YOLOTUI_QUEUE_POLL_S", "0.1")
    return set_used


def start(tmp_path: Path, name: str, release: Path, **kwargs) -> Path:
    run_dir = create_run_dir(tmp_path / "proj", name)
    launch(run_dir, [PY, "-c", WAIT_FOR_FILE, str(release)], name=name, **kwargs)
    return run_dir


def waiting_reason(run_dir: Path) -> str:
    status = read_status(run_dir)
    return (status.queue or {}).get("reason", "") if status and status.state == "queued" else ""


def wait_state(run_dir: Path, *states: str, timeout: float = 20.0) -> str:
    return wait_for(lambda: effective_state(run_dir) if effective_state(run_dir) in states else None, timeout)


def test_after_chain_runs_in_order_and_stop_while_queued(tmp_path, fake_gpus):
    go_a, go_b = tmp_path / "go_a", tmp_path / "go_b"
    a = start(tmp_path, "a", go_a, device="cpu")
    wait_state(a, "running")
    b = start(tmp_path, "b", go_b, device="cpu", queue=queue.make_spec(after=a, after_ok=True))
    c = start(tmp_path, "c", go_b, device="cpu", queue=queue.make_spec(after=b))
    # queued at once, live (lock held), with the reason, and nothing started
    assert lock.is_held(b) and effective_state(b) == "queued"
    wait_for(lambda: "waiting for a to end" in waiting_reason(b))
    wait_for(lambda: "waiting for b to end" in waiting_reason(c))
    listed = subprocess.run([PY, "-m", "yolotui", "ls"], capture_output=True, text=True, timeout=60).stdout
    row_b = next(line for line in listed.splitlines() if line.startswith("b "))
    assert "queued" in row_b and "a to end" in row_b
    assert read_status(b).attempt == 0 and not (b / "train.log").exists()
    # a queued run can be stopped: it ends stopped without ever starting
    d = start(tmp_path, "d", go_b, device="cpu", queue=queue.make_spec(after=a))
    wait_for(lambda: "waiting for a" in waiting_reason(d))
    stop(d)
    assert wait_state(d, "stopped") and read_status(d).attempt == 0 and not (d / "train.log").exists()

    go_a.touch()
    wait_state(a, "finished")
    wait_state(b, "running")
    assert effective_state(c) == "queued"
    go_b.touch()
    wait_state(b, "finished")
    wait_state(c, "finished")
    sa, sb, sc = (read_status(r) for r in (a, b, c))
    assert sa.ended <= sb.attempts[0]["started"] and sb.ended <= sc.attempts[0]["started"]
    assert sb.queue["reason"] and sb.queue["since"] < sb.attempts[0]["started"]


def test_after_ok_never_starts_after_a_failure(tmp_path, fake_gpus):
    a = create_run_dir(tmp_path / "proj", "a")
    launch(a, [PY, "-c", "raise SystemExit(3)"], name="a", device="cpu")
    b = start(tmp_path, "b", tmp_path / "never", device="cpu", queue=queue.make_spec(after=a, after_ok=True))
    wait_state(b, "failed")
    status = read_status(b)
    assert status.attempt == 0 and "--after-ok" in status.message and status.failure_class == "queue"


def test_when_free_runs_one_at_a_time_in_queue_order(tmp_path, fake_gpus):
    go_a, go_b, go_c = tmp_path / "go_a", tmp_path / "go_b", tmp_path / "go_c"
    fake_gpus(70 * GIB)  # somebody else's job: 10 GiB free
    a = start(tmp_path, "a", go_a, device="0", queue=queue.make_spec(when_free="20G", device="0"))
    wait_for(lambda: "10.0 of 20 GiB free" in waiting_reason(a))
    b = start(tmp_path, "b", go_b, device="0", queue=queue.make_spec(when_free="20G", device="0"))
    time.sleep(0.05)  # b and c must differ in their queue time
    c = start(tmp_path, "c", go_c, device="0", queue=queue.make_spec(when_free="20G", device="0"))
    wait_for(lambda: "behind a" in waiting_reason(b) or "10.0 of" in waiting_reason(b))
    fake_gpus(0)  # the other job ended: a goes first, b and c see the GPU held by a yolotui run
    wait_state(a, "running")
    wait_for(lambda: "held by yolotui run a" in waiting_reason(b))
    wait_for(lambda: "held by yolotui run a" in waiting_reason(c) or "behind b" in waiting_reason(c))
    assert effective_state(b) == effective_state(c) == "queued"
    go_a.touch()
    wait_state(b, "running")  # b was queued before c
    assert effective_state(c) == "queued"
    wait_for(lambda: "held by yolotui run b" in waiting_reason(c))
    go_b.touch()
    wait_state(c, "running")
    go_c.touch()
    wait_state(c, "finished")
    starts = [read_status(r).attempts[0]["started"] for r in (a, b, c)]
    assert starts == sorted(starts)
    assert read_status(c).queue["claimed"] == [0]


def test_queued_run_is_interrupted_by_a_reboot_like_any_run(tmp_path, fake_gpus):
    from runs_helpers import kill_run

    a = start(tmp_path, "a", tmp_path / "go_a", device="cpu")
    b = start(tmp_path, "b", tmp_path / "go_b", device="cpu", queue=queue.make_spec(after=a))
    wait_for(lambda: waiting_reason(b))
    kill_run(b)  # the machine went down
    wait_for(lambda: not lock.is_held(b))
    assert effective_state(b) == "interrupted" and read_status(b).attempt == 0
    # `yolotui resume --interrupted` at boot: b waits again for the same condition, from its first attempt
    from yolotui.placement.service import resume_interrupted

    results = {r.name: r for r in resume_interrupted()}
    assert results["b"].resumed, results
    wait_for(lambda: "waiting for a to end" in waiting_reason(b))
    assert lock.is_held(b) and read_status(b).attempt == 0
    (tmp_path / "go_a").touch()
    (tmp_path / "go_b").touch()
    wait_state(b, "finished")
    assert read_status(b).attempts[0]["command"][-1] == str(tmp_path / "go_b")  # no resume arguments added


def test_waiting_text_for_lists():
    status = SimpleNamespace(state="queued", queue={"reason": "waiting for a to end"})
    assert queue.waiting_text(status) == "waiting for a to end"
    assert queue.waiting_text(SimpleNamespace(state="running", queue=None)) is None


# --------------------------------------------------------------------------------------------- the CLI

def test_train_after_queues_a_training_run_that_can_be_stopped(tmp_path, fake_gpus, capsys):
    from trainkit import make_data, write_tiny_cfg

    from yolotui.cli import main

    start(tmp_path, "a", tmp_path / "go_a", device="cpu")
    data = make_data(tmp_path / "data", n_train=2, n_val=1, img=64)
    base = ["train", "--data", str(data), "--cfg", str(write_tiny_cfg(tmp_path)), "--img", "64", "--epochs", "1",
            "--device", "cpu", "--workers", "0", "--project", str(tmp_path / "runs")]
    # refused before anything is made: an unknown run, a CPU run waiting for GPUs
    assert main([*base, "--name", "x", "--after", "no-such-run"]) == 2
    assert "no-such-run" in capsys.readouterr().err and not (tmp_path / "runs" / "x").exists()
    assert main([*base, "--name", "y", "--when-free", "20G"]) == 2
    assert "cpu" in capsys.readouterr().err and not (tmp_path / "runs" / "y").exists()

    assert main([*base, "--name", "later", "--after", "a", "--after-ok"]) == 0
    out = capsys.readouterr().out
    assert "queued run later" in out and "starts after a succeeds" in out
    later = tmp_path / "runs" / "later"
    wait_for(lambda: "waiting for a to end" in waiting_reason(later))
    assert main(["rm", "later"]) == 2  # live while queued: stop it first, like any run
    assert "stop it first" in capsys.readouterr().err
    assert main(["stop", str(later)]) == 0
    wait_state(later, "stopped")
    status = read_status(later)
    assert status.attempt == 0 and not (later / "weights" / "last.pt").exists()
    # resuming a run that never started queues it again, as it was
    capsys.readouterr()
    assert main(["resume", "later", "--epochs", "3"]) == 2
    assert "never started" in capsys.readouterr().err
    assert main(["resume", "later"]) == 0
    assert "queued run later" in capsys.readouterr().out
    wait_for(lambda: "waiting for a to end" in waiting_reason(later))
    assert main(["stop", "later"]) == 0
    wait_state(later, "stopped")
    wait_for(lambda: not lock.is_held(later))  # the supervisor exits just after recording `stopped`
    assert main(["rm", "later", "--files"]) == 0 and not later.exists()
