"""Helpers for the trainer tests: a tiny model config, tiny demo data, run folders and trainer subprocesses."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent

# A scaled-down GELAN: three stride levels (8, 16, 32) and the DDetect head, ~0.1 M parameters.
TINY_CFG: dict[str, Any] = {
    "nc": 5,
    "depth_multiple": 1.0,
    "width_multiple": 1.0,
    "backbone": [
        [-1, 1, "Conv", [8, 3, 2]],
        [-1, 1, "Conv", [16, 3, 2]],
        [-1, 1, "AConv", [16]],
        [-1, 1, "AConv", [24]],
        [-1, 1, "AConv", [32]],
    ],
    "head": [[[2, 3, 4], 1, "DDetect", ["nc"]]],
}

# Light augmentation keeps the tiny runs quick and the loss informative.
TEST_HYP_OVERRIDES = {"warmup_epochs": 0.0, "mosaic": 0.0, "mixup": 0.0, "scale": 0.1, "translate": 0.05}


def write_tiny_cfg(folder: Path) -> Path:
    """The tiny model as a YAML file."""
    path = Path(folder) / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY_CFG, sort_keys=False))
    return path


def make_data(folder: Path, n_train: int = 8, n_val: int = 4, img: int = 64) -> Path:
    """A tiny demo data set; returns its data.yaml."""
    from yolotui.datasets import make_demo_dataset

    return Path(make_demo_dataset(Path(folder), n_train=n_train, n_val=n_val, img=img, seed=0))


def make_run(tmp: Path, name: str = "run", data: Path | None = None, hyp: dict | None = None, **opt: Any) -> Path:
    """A run folder with opt.yaml and hyp.yaml as `yolotui train` writes them (no launch)."""
    from yolotui.config import default_options, load_hyp, validate_options
    from yolotui.configs import resolve_hyp
    from yolotui.jobs.launch import write_run_files

    tmp = Path(tmp)
    data = data or make_data(tmp / "data")
    base = {"cfg": str(write_tiny_cfg(tmp)), "data": str(data), "epochs": 2, "batch_size": 4, "imgsz": 64,
            "device": "cpu", "workers": 0, "project": str(tmp / "runs"), "name": name, "patience": 0}
    options, _ = validate_options(default_options(**{**base, **opt}))
    run_dir = tmp / "runs" / name
    (run_dir / "weights").mkdir(parents=True, exist_ok=True)
    write_run_files(run_dir, options, {**load_hyp(resolve_hyp(None)), **TEST_HYP_OVERRIDES, **(hyp or {})})
    return run_dir


def trainer_env(**extra: str) -> dict[str, str]:
    """Environment for a trainer subprocess: this checkout, one torch thread, deterministic."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    env["YOLOTUI_TORCH_THREADS"] = "1"
    env["OMP_NUM_THREADS"] = "1"
    env.update(extra)
    return env


def trainer_argv(run_dir: Path, *extra: str) -> list[str]:
    """argv of the trainer process."""
    return [sys.executable, "-m", "yolotui.engine", "train", "--run-dir", str(run_dir), *extra]


def run_trainer(run_dir: Path, *extra: str, timeout: float = 240, **env: str) -> subprocess.CompletedProcess:
    """Run the trainer to its end in a subprocess."""
    return subprocess.run(trainer_argv(run_dir, *extra), env=trainer_env(**env), capture_output=True, text=True,
                          timeout=timeout)


def start_trainer(run_dir: Path, *extra: str, **env: str) -> subprocess.Popen:
    """Start the trainer in a subprocess (output to train.log)."""
    log = open(Path(run_dir) / "train.log", "ab")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(trainer_argv(run_dir, *extra), env=trainer_env(**env), stdout=log,
                            stderr=subprocess.STDOUT)


def wait_for_event(run_dir: Path, predicate, proc: subprocess.Popen, timeout: float = 180) -> dict:
    """Poll the run's events until one satisfies `predicate`; fail if the process ends first."""
    from runs_helpers import run_events

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for event in run_events(run_dir):
            if predicate(event):
                return event
        if proc.poll() is not None:
            raise AssertionError(f"trainer ended (rc {proc.returncode}) before the awaited event:\n"
                                 + (Path(run_dir) / "train.log").read_text()[-3000:])
        time.sleep(0.05)
    raise AssertionError("timed out waiting for an event")


def kill_after_mid_epoch_checkpoint(run_dir: Path, proc: subprocess.Popen, sig: int = signal.SIGKILL,
                                    after_step: int = 1, epoch: int = 0) -> dict:
    """Wait for a mid-epoch checkpoint at (epoch, step >= after_step), then send `sig`; returns the event."""
    event = wait_for_event(run_dir, lambda e: e.get("type") == "checkpoint" and e.get("epoch") == epoch
                           and 0 < int(e.get("step", 0)) and int(e.get("step", 0)) >= after_step, proc)
    proc.send_signal(sig)
    proc.wait(timeout=120)
    return event


def load(path: Path) -> dict:
    """torch.load with weights_only=True."""
    import torch

    return torch.load(path, map_location="cpu", weights_only=True)


def assert_same_weights(a: dict, b: dict) -> None:
    """Model and EMA tensors equal (torch.equal) key by key."""
    import torch

    for part in ("model", "ema"):
        assert a[part].keys() == b[part].keys()
        for key in a[part]:
            assert torch.equal(a[part][key], b[part][key]), f"{part}.{key} differs"
