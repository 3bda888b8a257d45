"""Shared by train, resume, finetune and demo: write a run's option files and start its trainer detached."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from yolotui.config import opt_yaml_dict, save_yaml
from yolotui.runs import layout

DEFAULT_MAX_ATTEMPTS = 3


def write_run_files(run_dir: Path, opt: dict[str, Any], hyp: dict[str, Any]) -> None:
    """opt.yaml (official keys, save_dir set) and hyp.yaml."""
    save_yaml(Path(run_dir) / layout.OPT_YAML, opt_yaml_dict({**opt, "save_dir": str(run_dir)}))
    save_yaml(Path(run_dir) / layout.HYP_YAML, hyp)


def engine_command(run_dir: Path, overrides: dict[str, Any] | None = None, nproc: int = 1) -> list[str]:
    """argv of the trainer for `run_dir`, with resume overrides as flags; under torchrun when `nproc` > 1."""
    launcher = [sys.executable]
    if nproc > 1:
        launcher += ["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}"]
    argv = [*launcher, "-m", "yolotui.engine", "train", "--run-dir", str(run_dir)]
    for key, value in (overrides or {}).items():
        if value is not None:
            argv += [f"--{key.replace('_', '-')}", str(value)]
    return argv


def start_training(run_dir: Path, opt: dict[str, Any], overrides: dict[str, Any] | None = None,
                   max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> None:
    """Launch the trainer for `run_dir` under a detached supervisor (UserError before detaching on bad input)."""
    from yolotui.runs.launcher import launch

    run_dir = Path(run_dir)
    device = str((overrides or {}).get("device") or opt.get("device") or "")
    nproc = len(device.split(",")) if device.strip().lower() not in ("", "cpu") else 1
    launch(run_dir, engine_command(run_dir, overrides, nproc), name=run_dir.name, backend="yolotui",
           device=str(opt.get("device") or ""), max_attempts=max_attempts,
           extra={"options": opt_yaml_dict(opt), "save_signal": True})


def after_launch(run_dir: Path, attach: bool, verb: str = "started") -> int:
    """Print where the run lives; follow it in plain text when `attach`."""
    print(f"{verb} run {Path(run_dir).name}: {run_dir}")
    if attach:
        from yolotui.commands._progress import follow

        follow(Path(run_dir))
    else:
        print(f"follow it with: yolotui attach {run_dir}    stop it with: yolotui stop {run_dir}")
    return 0
