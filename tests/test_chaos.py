"""Chaos: kill the supervisor and the trainer at random moments, resume, and check nothing is lost.

Each round resumes the run (or extends it once it has finished; the second round with two simultaneous
resumes, of which exactly one may win), then SIGKILLs the supervisor, the trainer,
both, the trainer while a checkpoint is being written, or one of them right after the resume returned (while
the trainer is still loading), at a random moment. After each round, once nothing of the run is left:

- at most one trainer process ever ran for the run folder (sampled every 20 ms throughout),
- weights/last.pt loads with torch.load(weights_only=True) and matches its manifest (sha256, bytes, epoch,
  step),

and at the end the run resumes to `finished` with exactly one results row per planned epoch.

The default suite runs 3 rounds; the 20-round version is marked `slow` (about two minutes on a quiet machine).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from runs_helpers import reap_runs, wait_for  # noqa: F401 - reap_runs is an autouse fixture
from trainkit import TEST_HYP_OVERRIDES, make_data, write_tiny_cfg

from yolotui import procs
from yolotui.runs import lock
from yolotui.runs.layout import ENDED_STATES
from yolotui.runs.manifest import reconcile_run
from yolotui.runs.results import read_rows
from yolotui.runs.status import effective_state, read_status

MODES = ("supervisor", "trainer", "both", "checkpoint-write", "resume-supervisor", "resume-trainer")


class TrainerCounter:
    """Counts, every 20 ms in a thread, the live trainer processes of one run folder; keeps the maximum."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = str(run_dir)
        self.most = 0
        self.seen: list = []  # the trainers seen when `most` was reached (pid, argv, parent), for the message
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def trainers(self) -> list[int]:
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            argv = procs.cmdline(int(entry.name))
            if "yolotui.engine" in argv and self.run_dir in argv and procs.is_alive(int(entry.name)):
                found.append(int(entry.name))
        return found

    def _loop(self) -> None:
        while not self._stop.is_set():
            found = self.trainers()
            if len(found) > self.most:
                self.most = len(found)
                self.seen = [(pid, procs.cmdline(pid), procs.parent_pid(pid)) for pid in found]
            time.sleep(0.02)

    def __enter__(self) -> TrainerCounter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def _env(cli_env: dict[str, str]) -> dict[str, str]:
    return {**cli_env, "YOLOTUI_TORCH_THREADS": "1", "OMP_NUM_THREADS": "1"}


def _yolotui(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "yolotui", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def _start_run(tmp_path: Path, env: dict[str, str], epochs: int) -> Path:
    from yolotui.config import load_hyp
    from yolotui.configs import resolve_hyp

    hyp = tmp_path / "hyp.yaml"
    hyp.write_text(yaml.safe_dump({**load_hyp(resolve_hyp(None)), **TEST_HYP_OVERRIDES}))
    data = make_data(tmp_path / "data", n_train=8, n_val=2, img=64)
    done = _yolotui(env, "train", "--cfg", str(write_tiny_cfg(tmp_path)), "--data", str(data), "--hyp", str(hyp),
                    "--epochs", str(epochs), "--batch", "4", "--img", "64", "--device", "cpu", "--workers", "0",
                    "--project", str(tmp_path / "runs"), "--name", "chaos", "--save-period-min", "1e-7",
                    "--restart-backoff", "0")
    assert done.returncode == 0, done.stdout + done.stderr
    return tmp_path / "runs" / "chaos"


def _trainer_pid(run_dir: Path) -> int | None:
    status = read_status(run_dir)
    return status.trainer_pid if status is not None else None


def _kill(pid: int | None) -> None:
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _wait_trainer(run_dir: Path, timeout: float = 60) -> int | None:
    """The trainer's pid once the supervisor has started it (None if the run ended first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = _trainer_pid(run_dir)
        if pid:
            return pid
        if not lock.is_held(run_dir):
            return None
        time.sleep(0.01)
    raise AssertionError("no trainer started")


def _wait_checkpoint_write(run_dir: Path, timeout: float = 20) -> None:
    folder = run_dir / "weights"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and lock.is_held(run_dir):
        if any(name.startswith(".") and name.endswith(".tmp") for name in os.listdir(folder)):
            return
        time.sleep(0.002)


def _check_checkpoint(run_dir: Path) -> None:
    import torch

    last = run_dir / "weights" / "last.pt"
    if not last.exists():
        return
    ckpt = torch.load(last, map_location="cpu", weights_only=True)
    manifest = json.loads((run_dir / "weights" / "last.pt.json").read_text())
    data = last.read_bytes()
    assert hashlib.sha256(data).hexdigest() == manifest["sha256"] and len(data) == manifest["bytes"]
    assert (int(ckpt["epoch"]), int(ckpt["step"])) == (manifest["epoch"], manifest["step"])


def _resume_args(run_dir: Path) -> list[str]:
    """`resume RUN`, or `resume RUN --epochs N+1` once last.pt holds all planned epochs (finished, or killed
    after its last checkpoint)."""
    manifest = json.loads((run_dir / "weights" / "last.pt.json").read_text())
    if int(manifest["epoch"]) >= int(manifest["epochs"]):
        return ["resume", str(run_dir), "--epochs", str(int(manifest["epochs"]) + 1)]
    return ["resume", str(run_dir)]


def _resume_or_extend(run_dir: Path, env: dict[str, str]) -> None:
    done = _yolotui(env, *_resume_args(run_dir))
    assert done.returncode == 0, f"{effective_state(run_dir)}: {done.stdout}{done.stderr}"


def _double_resume(run_dir: Path, env: dict[str, str]) -> None:
    """Two `yolotui resume` at once: exactly one wins; the other exits 1 with one line naming the winner."""
    args = [sys.executable, "-m", "yolotui", *_resume_args(run_dir)]
    children = [subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(2)]
    results = [(child.wait(timeout=120), child.stderr.read()) for child in children]
    assert sorted(code for code, _ in results) == [0, 1], results
    loser = next(err for code, err in results if code == 1).strip()
    assert len(loser.splitlines()) == 1 and "owned by pid" in loser, loser


def chaos(tmp_path: Path, cli_env: dict[str, str], rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    env = _env(cli_env)
    run_dir: Path | None = None
    with TrainerCounter(tmp_path / "runs" / "chaos") as counter:
        for round_no in range(rounds):
            mode = MODES[round_no % len(MODES)] if round_no < len(MODES) else rng.choice(MODES)
            if run_dir is None:
                run_dir = _start_run(tmp_path, env, epochs=3)
                # resume needs a first checkpoint: a run killed before it must be started again with `train`
                wait_for(lambda: (run_dir / "weights" / "last.pt.json").exists(), timeout=120, interval=0.05)
            elif round_no == 1:
                _double_resume(run_dir, env)
            else:
                _resume_or_extend(run_dir, env)
            _wait_trainer(run_dir)
            if mode.startswith("resume-"):
                time.sleep(rng.uniform(0.0, 0.3))  # the trainer is still starting and loading last.pt
            elif mode == "checkpoint-write":
                _wait_checkpoint_write(run_dir)
            else:
                time.sleep(rng.uniform(0.2, 2.5))
            supervisor = (read_status(run_dir) or None) and read_status(run_dir).supervisor_pid
            trainer = _trainer_pid(run_dir)
            if mode in ("supervisor", "resume-supervisor", "both"):
                _kill(supervisor)
            if mode in ("trainer", "resume-trainer", "both", "checkpoint-write"):
                _kill(trainer)
            wait_for(lambda: not lock.is_held(run_dir), timeout=90, interval=0.05)
            assert counter.trainers() == [], f"round {round_no} ({mode}): a trainer outlived the run's lock"
            if mode == "both":
                reconcile_run(run_dir)  # nobody of the run survived: what the next launch does first
            _check_checkpoint(run_dir)
            assert counter.most <= 1, f"round {round_no} ({mode}): two trainers ran in one run folder: {counter.seen}"
        # Finally, let it finish undisturbed.
        for _ in range(5):
            if effective_state(run_dir) == "finished":
                break
            done = _yolotui(env, *_resume_args(run_dir))
            assert done.returncode == 0, done.stdout + done.stderr
            wait_for(lambda: effective_state(run_dir) in ENDED_STATES, timeout=240, interval=0.2)
        assert counter.most <= 1
    assert effective_state(run_dir) == "finished", ((run_dir / "train.log").read_text()[-3000:] + "\n--- supervisor.log\n"
                                                     + (run_dir / "supervisor.log").read_text()[-3000:])
    planned = int(json.loads((run_dir / "weights" / "last.pt.json").read_text())["epochs"])
    rows = read_rows(run_dir / "results.csv")
    assert [int(row["epoch"]) for row in rows] == list(range(planned))
    _check_checkpoint(run_dir)


@pytest.mark.timeout(600)
def test_chaos_three_rounds(tmp_path, cli_env):
    chaos(tmp_path, cli_env, rounds=3, seed=14)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_chaos_twenty_rounds(tmp_path, cli_env):
    chaos(tmp_path, cli_env, rounds=20, seed=1414)
