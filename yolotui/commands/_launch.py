"""Shared by train, resume, finetune and demo: write a run's option files and start its trainer detached."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from yolotui.commands._distributed import DistributedLaunch
from yolotui.config import opt_yaml_dict, save_yaml
from yolotui.runs import layout

DEFAULT_MAX_ATTEMPTS = 5  # attempts in all (the first and 4 restarts), issue 7


def write_run_files(run_dir: Path, opt: dict[str, Any], hyp: dict[str, Any]) -> None:
    """opt.yaml (official keys, save_dir set) and hyp.yaml."""
    save_yaml(Path(run_dir) / layout.OPT_YAML, opt_yaml_dict({**opt, "save_dir": str(run_dir)}))
    save_yaml(Path(run_dir) / layout.HYP_YAML, hyp)


def engine_command(run_dir: Path, overrides: dict[str, Any] | None = None, nproc: int = 1,
                   launch: DistributedLaunch | None = None) -> list[str]:
    """argv of the trainer for `run_dir`, with resume overrides as flags; under torchrun when the layout
    (`launch`, else `nproc` processes on this machine) has more than one process."""
    launcher = [sys.executable]
    if launch is None and nproc > 1:
        launch = DistributedLaunch(nproc_per_node=nproc)
    if launch is not None and launch.uses_torchrun:
        launcher += ["-m", "torch.distributed.run", *launch.torchrun_args()]
    argv = [*launcher, "-m", "yolotui.engine", "train", "--run-dir", str(run_dir)]
    for key, value in (overrides or {}).items():
        if value is not None:
            argv += [f"--{key.replace('_', '-')}", str(value)]
    return argv


def start_training(run_dir: Path, opt: dict[str, Any], overrides: dict[str, Any] | None = None,
                   max_attempts: int = DEFAULT_MAX_ATTEMPTS, dist_flags: dict[str, Any] | None = None,
                   backoff_s: float | None = None, run_extra: dict[str, Any] | None = None) -> None:
    """Launch the trainer for `run_dir` under a detached supervisor (UserError before detaching on bad input).

    `dist_flags` holds the process-layout flags (--nproc-per-node, --nnodes, --node-rank, --rdzv-endpoint ...);
    see yolotui.commands._distributed. `run_extra`: the shared flags' run.yaml entries (commands/_runflags.py);
    those of the run's previous run.yaml that are not given again are kept (a resume keeps its notifications).
    """
    from yolotui.commands._distributed import plan_launch, run_yaml_entry, sync_bn_warning
    from yolotui.commands._runflags import carried_over
    from yolotui.runs.launcher import launch

    run_dir = Path(run_dir)
    device = str((overrides or {}).get("device") or opt.get("device") or "")
    batch_size = int((overrides or {}).get("batch_size") or opt.get("batch_size") or 1)
    plan, warnings = plan_launch(device, batch_size, dist_flags)
    note = sync_bn_warning(bool(opt.get("sync_bn")), device, plan)
    for warning in [*warnings, *([note] if note else [])]:
        print(f"warning: {warning}")
    launch(run_dir, engine_command(run_dir, overrides, launch=plan), name=run_dir.name, backend="yolotui",
           device=str(opt.get("device") or ""), max_attempts=max_attempts, env=plan.env(),
           **({"backoff_s": float(backoff_s)} if backoff_s is not None else {}),
           extra={"options": opt_yaml_dict(opt), "save_signal": True,
                  "distributed": run_yaml_entry(plan, dist_flags), **carried_over(run_dir, run_extra or {})})


def after_launch(run_dir: Path, attach: bool, verb: str = "started") -> int:
    """Print where the run lives; follow it in plain text when `attach`."""
    print(f"{verb} run {Path(run_dir).name}: {run_dir}")
    from yolotui.runs.logout import launch_lines_for

    for line in launch_lines_for(run_dir):  # how it survives logout (issue 7)
        print(line)
    if attach:
        from yolotui.commands._progress import follow

        follow(Path(run_dir))
    else:
        print(f"follow it with: yolotui attach {run_dir}    stop it with: yolotui stop {run_dir}")
    return 0
