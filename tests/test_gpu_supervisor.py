"""The supervisor's GPU watching end to end, against the scripted NVML (tests/fake_nvml.py) in its watcher
child: a thermally throttled GPU notifies once and shows in status.json's GPU summary; an Xid followed by a
crash is `gpu-fault` and the run resumes on the free GPU."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fake_nvml import scenario, write_state
from runs_helpers import reap_runs, wait_for  # noqa: F401  (reap_runs is an autouse fixture)

from yolotui.placement.launcher import launch
from yolotui.runs.status import effective_state, read_status
from yolotui.runs.store import create_run_dir

FAKE = str(Path(__file__).with_name("fake_nvml.py"))

# The trainer: waits for `go`, then crashes on its first attempt; exits 0 on the retry when CUDA_VISIBLE_DEVICES
# moved it to GPU 1.
TRAINER = """
import os, sys, time
go = sys.argv[1]
if os.environ.get("YOLOTUI_ATTEMPT") == "2":
    print("visible", os.environ.get("CUDA_VISIBLE_DEVICES"), os.environ.get("CUDA_DEVICE_ORDER"))
    sys.exit(0 if os.environ.get("CUDA_VISIBLE_DEVICES") == "1" else 5)
deadline = time.time() + 60
while not os.path.exists(go) and time.time() < deadline:
    time.sleep(0.05)
print("RuntimeError: CUDA error: unspecified launch failure", flush=True)
sys.exit(1)
"""


def _summary(run_dir: Path, attempt: int = 1) -> dict:
    status = read_status(run_dir)
    for entry in (status.gpu_summary or []) if status else []:
        if entry.get("attempt") == attempt:
            return entry
    return {}


def _notifications(folder: Path) -> list[dict]:
    """Each hook writes its own file (two hooks may run at once), read in the order they were written."""
    if not folder.exists():
        return []
    done = sorted((p for p in folder.glob("*.json")), key=lambda p: p.stat().st_mtime_ns)
    return [json.loads(p.read_text()) for p in done]


def test_throttling_notifies_once_and_a_crash_after_an_xid_moves_the_run(tmp_path, monkeypatch):
    state = tmp_path / "nvml.json"
    write_state(state, [scenario("thermal", 0), scenario("healthy", 1)])
    monkeypatch.setenv("YOLOTUI_NVML_MODULE", FAKE)
    monkeypatch.setenv("FAKE_NVML_STATE", str(state))
    monkeypatch.setenv("YOLOTUI_GPU_SAMPLE_S", "0.1")
    received = tmp_path / "notifications"
    received.mkdir()
    go = tmp_path / "go"
    run_dir = create_run_dir(tmp_path / "proj", "exp")
    launch(run_dir, [sys.executable, "-c", TRAINER, str(go)], name="exp", device="0", max_attempts=2,
           backoff_s=0.05, extra={"notify": {"command": f"cat > {received}/.n-$$ && mv {received}/.n-$$ {received}/n-$$.json"}})

    summary = wait_for(lambda: _summary(run_dir) if _summary(run_dir).get("samples", 0) >= 8 else None, 30)
    assert summary["gpus"] == [0] and summary["throttled_s"] > 0 and summary["throttled_now"]
    assert summary["throttle_reasons_s"].get("thermal", 0) > 0 and summary["max_temperature_c"] == 91
    assert summary["min_clock_pct"] == 55.6 and summary["slowdown_temperature_c"] == 90
    gpu_news = wait_for(lambda: [n for n in _notifications(received) if n["event"] == "gpu"], 20)
    assert len(gpu_news) == 1 and gpu_news[0]["gpu_news"] == "throttle"  # once, not on every sample
    assert "throttled: thermal" in gpu_news[0]["body"] and "airflow" in gpu_news[0]["body"]

    write_state(state, [scenario("thermal", 0, xids=[79]), scenario("healthy", 1)])
    wait_for(lambda: _summary(run_dir).get("xids"), 20)
    go.touch()
    wait_for(lambda: effective_state(run_dir) == "finished", 40)
    final = read_status(run_dir)
    first = final.attempts[0]
    assert first["failure_class"] == "gpu-fault" and "Xid 79 on GPU 0" in first["message"]
    assert "resume on GPU 1" in first["remedy"]
    assert final.attempts[1]["exit_code"] == 0
    assert "visible 1 PCI_BUS_ID" in (run_dir / "train.log").read_text()
    assert _summary(run_dir, attempt=2)["gpus"] == [1]  # the retry's summary follows the GPU it moved to
    xid = _summary(run_dir)["xids"][0]
    assert xid["xid"] == 79 and xid["gpu"] == 0 and xid["source"] == "nvml"
    assert _summary(run_dir)["lost"][0]["gpu"] == 0  # Xid 79: fell off the bus
    news = [n["gpu_news"] for n in _notifications(received) if n["event"] == "gpu"]
    # one sample saw both: each is sent by its own child process, so they may land in either order
    assert news[0] == "throttle" and sorted(news[1:3]) == ["lost", "xid"]
