"""The Backend seam: everything yolotui needs to know about one kind of trainer, in one place.

A backend answers five questions for the job layer (yolotui.jobs) and the supervisor's remedies:
how to start a new run, how to resume one, which remedies its command understands, where its outputs
(results.csv, weights/, opt.yaml) live given the run folder, and what it cannot do (save now, stop
mid-epoch, scale the LR, extend). It never launches anything itself: it returns a `LaunchSpec`, and
yolotui.placement.launcher starts that under the detached supervisor. Torch-free and UI-free.

run.yaml's `backend` field holds `Backend.name`; `yolotui.backends.get_backend(name)` maps it back.
To add a backend, subclass `Backend` in its own module and add one line to `yolotui.backends.REGISTRY`
(or call `register_backend` at import time).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yolotui.placement.distributed import DistributedLaunch

# Remedy names (yolotui/supervisor/remedies.py): what the supervisor may change before a retry.
REMEDY_HALVE_BATCH = "halve_batch"  # oom: --batch-size halved (any command taking --batch-size/--batch)
REMEDY_ACCUMULATE = "accumulate"    # oom: --accumulate doubled so images per optimizer step stay the same
REMEDY_LR_SCALE = "lr_scale"        # nan: --lr-scale halved on the resumed attempt
REMEDY_ALLOC_CONF = "alloc_conf"    # oom: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
REMEDY_NCCL_ENV = "nccl_env"        # comm: NCCL async error handling / blocking wait / collective timeout
REMEDY_RETRY = "retry"              # crash/comm: rerun the command (its resume_args on retries) after backoff
REMEDY_WORKERS = "workers"          # host-oom: --workers halved, --cache ram dropped (a trainer that always has them)
REMEDY_DEVICE = "device"            # gpu-fault: --device 0 under CUDA_VISIBLE_DEVICES=<a free GPU> (takes --device)
REMEDY_OPT_YAML = "opt_yaml"        # oom: the halved batch written to opt.yaml too (its --resume reads options there)
ALL_REMEDIES = frozenset({REMEDY_HALVE_BATCH, REMEDY_ACCUMULATE, REMEDY_LR_SCALE, REMEDY_ALLOC_CONF,
                          REMEDY_NCCL_ENV, REMEDY_RETRY, REMEDY_WORKERS, REMEDY_DEVICE})


@dataclass(frozen=True)
class Capabilities:
    """What a backend's trainer can do; the CLI and the TUI grey out or refuse what it cannot."""

    save_now: bool = False        # writes a checkpoint on SIGUSR1 (`yolotui save`, the TUI's save key)
    mid_epoch_stop: bool = False  # a graceful stop checkpoints mid-epoch; resume continues at the next batch
    resume: bool = False          # a stopped/interrupted run can be resumed from its last.pt
    extend: bool = False          # resume with --epochs above the plan re-plans the LR schedule
    lr_scale: bool = False        # takes --lr-scale (the nan remedy)
    distributed: bool = False     # can run under torchrun (--device 0,1, --nproc-per-node, --nnodes)


@dataclass(frozen=True)
class RunOutputs:
    """Where a run's outputs live (None: this backend does not write that file)."""

    results_csv: Path | None
    weights_dir: Path | None
    opt_yaml: Path | None

    @property
    def last_pt(self) -> Path | None:
        """weights/last.pt, the checkpoint a resume continues from."""
        return self.weights_dir / "last.pt" if self.weights_dir is not None else None

    @property
    def best_pt(self) -> Path | None:
        """weights/best.pt, the best checkpoint by fitness."""
        return self.weights_dir / "best.pt" if self.weights_dir is not None else None


@dataclass(frozen=True)
class CommandRequest:
    """What a backend needs to build a run's command.

    `opt` holds the resolved training options (official train_dual.py names, as in opt.yaml); `overrides`
    the options changed on resume (epochs, batch_size, device, workers; None values mean unchanged);
    `layout` the process layout (None: one process); `argv` the user's own command (exec backend).
    """

    run_dir: Path
    opt: dict[str, Any] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)
    layout: DistributedLaunch | None = None
    argv: tuple[str, ...] = ()


@dataclass(frozen=True)
class LaunchSpec:
    """What to hand yolotui.placement.launcher.launch: the argv, its environment additions and working folder,
    and the extra run.yaml options (save_signal, options, distributed, resume_args ...)."""

    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Backend(ABC):
    """One kind of trainer. Subclasses set `name` and `capabilities` and implement the four methods."""

    name: str = ""                      # run.yaml's `backend` value
    title: str = ""                     # how a message names its trainer ("the official trainer")
    label: str = ""                     # its short display name in tables ("engine", "command")
    capabilities: Capabilities = Capabilities()

    @abstractmethod
    def new_run_command(self, request: CommandRequest) -> LaunchSpec:
        """The command that starts a new run in `request.run_dir` (opt.yaml/hyp.yaml already written there)."""

    @abstractmethod
    def resume_command(self, request: CommandRequest) -> LaunchSpec:
        """The command that continues the run in `request.run_dir` from its last checkpoint, with
        `request.overrides` applied (an --epochs above the plan extends it). UserError when it cannot resume."""

    @abstractmethod
    def remedies(self) -> frozenset[str]:
        """The remedy names (REMEDY_* above) the supervisor may apply to this backend's command."""

    @abstractmethod
    def outputs(self, run_dir: Path) -> RunOutputs:
        """Where results.csv, weights/ and opt.yaml of the run in `run_dir` live."""

    def follow(self, run_dir: Path, probe: bool = True) -> Any:
        """Where another project's trainer writes for this run, for doctor (health.report.ForeignRun), or None
        when the run folder is the trainer's own. `probe`: also check the trainer's interpreter."""
        return None

    def supports(self, capability: str) -> bool:
        """`capabilities.<capability>`, False for a name it does not know."""
        return bool(getattr(self.capabilities, capability, False))
