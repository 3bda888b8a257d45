"""Interrupted runs of every backend, built in a test's folder, for the resume pipeline's tests.

The foreign backends' run.yaml runs `fake_trainer.py` (a stdlib script that records its pid in RUN/trainers.txt,
then waits for RUN/release): what matters here is what yolotui does before it starts a trainer, not the
trainer. Checkpoints are small torch dicts in each trainer's layout, judged resumable by yolotui's scan.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch
import yaml

from yolotui.runs.runconfig import write_run_config

FAKE_TRAINER = '''import os, sys, time
from pathlib import Path
run = Path(sys.argv[1])
with open(run / "trainers.txt", "a") as out:
    out.write(f"{os.getpid()} {' '.join(sys.argv[2:])}\\n")
for _ in range(600):
    if (run / "release").exists() or (run / "release-now").exists():
        break
    time.sleep(0.05)
if os.environ.get("PLANTED"):
    Path(os.environ["PLANTED"]).touch()
'''


def fake_command(run_dir: Path) -> list[str]:
    """The argv of the fake trainer for `run_dir` (the script written beside it)."""
    script = run_dir.parent / "fake_trainer.py"
    script.write_text(FAKE_TRAINER)
    return [sys.executable, str(script), str(run_dir)]


def _run_yaml(run_dir: Path, backend: str, **extra) -> None:
    write_run_config(run_dir, {"name": run_dir.name, "backend": backend, "command": fake_command(run_dir),
                               "cwd": str(run_dir), "device": None, "env": {},
                               "restart": {"max_attempts": 1, "backoff_s": 0.0}, **extra})


def exec_run(root: Path) -> Path:
    """An exec run whose command was interrupted."""
    run_dir = root / "exec-run"
    run_dir.mkdir(parents=True)
    _run_yaml(run_dir, "exec")
    return run_dir


def official_run(root: Path) -> Path:
    """An official run with a resumable last.pt (epoch 1 of 3) and its opt.yaml."""
    run_dir = root / "official-run"
    (run_dir / "weights").mkdir(parents=True)
    (run_dir / "opt.yaml").write_text(yaml.safe_dump({"epochs": 3, "batch_size": 4, "save_dir": str(run_dir)}))
    torch.save({"epoch": 0, "best_fitness": None, "model": {"w": torch.zeros(2)}, "ema": {"w": torch.zeros(2)},
                "updates": 3, "optimizer": {"state": {}, "param_groups": []}, "opt": {"epochs": 3, "batch_size": 4},
                "git": None, "date": "2026"}, run_dir / "weights" / "last.pt")
    _run_yaml(run_dir, "official", official={"python": sys.executable, "repo": str(root), "script": "train_dual.py",
                                             "save_dir": str(run_dir), "args": []})
    return run_dir


def ultralytics_run(root: Path) -> Path:
    """An ultralytics run with a resumable last.pt (epoch 1 of 3)."""
    run_dir = root / "ultralytics-run"
    (run_dir / "weights").mkdir(parents=True)
    torch.save({"epoch": 0, "best_fitness": 0.1, "model": None, "ema": {"w": torch.zeros(2)}, "updates": 3,
                "optimizer": {"state": {}, "param_groups": []}, "scaler": None,
                "train_args": {"epochs": 3, "batch": 4, "data": "x.yaml", "model": "yolov9t.yaml"},
                "train_metrics": {}, "train_results": {"epoch": [1]}, "date": "2026-01-01", "version": "8.3.0"},
               run_dir / "weights" / "last.pt")
    _run_yaml(run_dir, "ultralytics", ultralytics={"python": sys.executable, "mode": "cli", "script": None,
                                                   "args": ["train"], "save_dir": str(run_dir)})
    return run_dir


def engine_run(root: Path) -> Path:
    """A run of yolotui's engine that finished 1 of 1 epochs (tiny): resumed with --epochs 2 it extends."""
    from trainkit import make_data, make_run

    from yolotui.engine.train.trainer import EngineOverrides, Trainer

    data = make_data(root / "data", n_train=2, n_val=1, img=32)
    run_dir = make_run(root, "engine-run", data=data, epochs=1, batch_size=2)
    trainer = Trainer(run_dir, EngineOverrides())
    trainer.setup()
    assert trainer.train() == 0
    return run_dir


def resume_twice_at_once(run_dir: Path, env: dict[str, str], *flags: str) -> list[subprocess.CompletedProcess]:
    """Start two `yolotui resume RUN FLAGS` at the same moment; both finished."""
    argv = [sys.executable, "-m", "yolotui", "resume", str(run_dir), *flags]
    procs = [subprocess.Popen(argv, env=env, cwd=run_dir.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, text=True) for _ in range(2)]
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        done.append(subprocess.CompletedProcess(argv, proc.returncode, out, err))
    return done
