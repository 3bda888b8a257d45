"""Fixture runs and a fake 8-GPU machine for the home screen's cockpit snapshots: deterministic (fixed times, fixed
GPU readings, distinct trainer pids), in every state the table shows (running, failed, queued, finished, stopped)
and with every backend."""

from __future__ import annotations

import json
import time
from pathlib import Path

from fake_nvml import FakeNVML, scenario
from tui_fixtures import FIXED_NOW, FixtureRun, make_run

from yolotui.runs.atomic import atomic_write_json
from yolotui.runs.events import BATCHES_FILE
from yolotui.runs.status import read_status, status_path
from yolotui.telemetry.gpu import GpuSampler

# name, state, epochs, done, backend, device, extra (failure_class / message / pid)
PLAN = [
    ("coco-yolov9c", "running", 300, 117, "yolotui", "0,1", {"pid": 5001}),
    ("shapes-tiny", "running", 40, 12, "official", "2", {"pid": 5002}),
    ("voc-ultra", "running", 100, 3, "ultralytics", "3", {"pid": 5003}),
    ("exec-sweep-3", "running", 20, 0, "exec", "4", {"pid": 5004}),
    ("coco-oom", "failed", 300, 41, "yolotui", "0", {"failure_class": "oom",
                                                    "message": "CUDA out of memory at batch 64; retries spent"}),
    ("bad-data", "failed", 50, 0, "yolotui", "1", {"failure_class": "data",
                                                  "message": "data.yaml: key 'train' missing"}),
    ("nan-lr", "failed", 100, 9, "official", "2", {"failure_class": "nan", "message": "loss became NaN"}),
    ("next-up", "queued", 100, 0, "yolotui", "0", {"message": "waiting for GPU 0: held by coco-yolov9c"}),
    ("after-sweep", "queued", 20, 0, "exec", "4", {"message": "waiting for exec-sweep-3 to end"}),
    ("coco-done", "finished", 12, 12, "yolotui", "0", {}),
    ("ultra-done", "finished", 10, 10, "ultralytics", "1", {}),
    ("paused-exp", "stopped", 80, 22, "yolotui", "5", {}),
]


def cockpit_runs(root: Path, count: int) -> list[FixtureRun]:
    """The first `count` runs of PLAN (12 at most), newest first by start time, indexed."""
    made = []
    for order, (name, state, epochs, done, backend, device, extra) in enumerate(PLAN[:count]):
        live = state in ("running", "queued")
        run = make_run(root, name, state=state, epochs=epochs, done_epochs=min(done, 12), hold_lock=live,
                       device=device, started=FIXED_NOW - 600 * (order + 1), failure_class=extra.get("failure_class"),
                       message=extra.get("message"), checkpoint=None if done == 0 else "good", log_lines=12,
                       batch_in_progress=None)
        _adjust(run.path, state, epochs, done, backend, extra)
        made.append(run)
    return made


def _adjust(run_dir: Path, state: str, epochs: int, done: int, backend: str, extra: dict) -> None:
    """Give the run its backend (run.yaml), its trainer pid and its pace: two batch events 60 s apart in the
    epoch in progress, so its ETA is the same on every machine."""
    (run_dir / "run.yaml").write_text(f"backend: {backend}\ncommand: [python, train.py]\n")
    status = read_status(run_dir)
    status.trainer_pid = extra.get("pid")
    status.backend = backend
    if state == "queued":
        status.message = extra["message"]
    atomic_write_json(status_path(run_dir), status.to_dict())
    if state != "running":
        return
    # the batch stream, after the events make_run wrote (their stamps are this machine's clock)
    later = time.time() + 1
    with open(run_dir / BATCHES_FILE, "a") as handle:
        for batch, ts in ((10, later), (40, later + 60)):
            handle.write(json.dumps({"ts": ts, "type": "batch", "attempt": 1, "epoch": done, "epochs": epochs,
                                     "batch": batch, "batches": 100, "imgs_per_s": 210.0}) + "\n")


def eight_gpu_sampler() -> GpuSampler:
    """Eight H200s: GPU0-1 held by coco-yolov9c (DDP), GPU2 by shapes-tiny, GPU3 thermally throttled under
    voc-ultra, GPU5 at its power cap, GPU6 holding another user's process, GPU7 idle."""
    gpus = [
        scenario("healthy", 0, procs=[(5001, 71000)]),
        scenario("healthy", 1, procs=[(5001, 70500)]),
        scenario("healthy", 2, procs=[(5002, 20000)], temp=58, util=64, power_mw=310000),
        scenario("thermal", 3, procs=[(5003, 52000)]),
        scenario("healthy", 4, procs=[], temp=45, util=88, mem=(9000, 143771)),
        scenario("power_cap", 5, procs=[], util=0, mem=(500, 143771)),
        scenario("healthy", 6, procs=[(9999, 30000)], temp=52, util=41, power_mw=250000),
        scenario("healthy", 7, procs=[], temp=33, util=0, mem=(0, 143771), power_mw=70000),
    ]
    return GpuSampler(nvml=FakeNVML(gpus))
