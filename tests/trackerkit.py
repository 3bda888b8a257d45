"""Helpers for the tracker tests: a run.yaml asking for trackers, raw TensorBoard records, an interrupted run."""

from __future__ import annotations

import signal
import sys
import time
from collections import defaultdict
from pathlib import Path

import yaml
from trainkit import start_trainer, wait_for_event

from yolotui.engine.trackers import tb_files


def write_run_yaml(run_dir: Path, trackers: dict, **extra) -> Path:
    """A run.yaml as the launcher writes it, with a `trackers` entry (the trainer is then started by the test)."""
    path = Path(run_dir) / "run.yaml"
    config = {"name": Path(run_dir).name, "backend": "yolotui",
              "command": [sys.executable, "-m", "yolotui.engine", "train", "--run-dir", str(run_dir)],
              "trackers": trackers, **extra}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def run_yaml(run_dir: Path) -> dict:
    """run.yaml as a mapping."""
    return yaml.safe_load((Path(run_dir) / "run.yaml").read_text()) or {}


def raw_scalars(folder: Path) -> dict[tuple[str, int], list[float]]:
    """Every scalar record of the folder's event files: (tag, step) -> the values written, in file order."""
    found: dict[tuple[str, int], list[float]] = defaultdict(list)
    for _, event in tb_files.read_events(folder):
        if event.HasField("summary"):
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    found[(value.tag, int(event.step))].append(float(value.simple_value))
                elif value.HasField("tensor") and value.metadata.plugin_data.plugin_name == "scalars":
                    found[(value.tag, int(event.step))].append(float(value.tensor.float_val[0]))
    return dict(found)


def hparams_records(folder: Path) -> int:
    """How many hparams experiment records the folder's event files hold."""
    return sum(1 for _, e in tb_files.read_events(folder) if e.HasField("summary")
               and any(v.tag == "_hparams_/experiment" for v in e.summary.value))


def wait_until(predicate, timeout: float = 60.0, what: str = "condition"):
    """Poll `predicate` until it is truthy; AssertionError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def interrupt_mid_epoch(run_dir: Path, epoch: int = 1, delay_s: str = "0.4", ready=None) -> dict:
    """Run the trainer slowly (attempt 1), ask for a checkpoint (SIGUSR1) early in `epoch`, wait for it, then for
    `ready(checkpoint_event)` (e.g. records past it on disk) and SIGKILL; returns the checkpoint event."""
    proc = start_trainer(run_dir, YOLOTUI_STEP_DELAY_S=delay_s)
    try:
        wait_for_event(run_dir, lambda e: e.get("type") == "batch" and e.get("epoch") == epoch, proc)
        proc.send_signal(signal.SIGUSR1)
        checkpoint = wait_for_event(run_dir, lambda e: e.get("type") == "checkpoint" and e.get("epoch") == epoch
                                    and int(e.get("step", 0)) > 0, proc)
        if ready is not None:
            wait_until(lambda: ready(checkpoint) or proc.poll() is not None, what="the interrupted attempt's records")
        assert proc.poll() is None, "the trainer ended before it could be killed mid-epoch"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    return checkpoint
