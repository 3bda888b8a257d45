"""The Backend seam: everything yolotui needs to know about one kind of trainer, in one place.

A backend answers five questions for the job layer (yolotui.jobs) and the supervisor's remedies:
how to start a new run, how to resume one, which remedies its command understands, where its outputs
(results.csv, weights/, opt.yaml) live given the run folder, and what it cannot do (save now, stop
mid-epoch, scale the LR, extend). It never launches anything itself: it returns a `LaunchSpec`, and
yolotui.placement.launcher starts that under the detached supervisor. Torch-free and UI-free.

run.yaml's `backend` field holds `Backend.name`; `yolotui.backends.get_backend(name)` maps it back.
Backends are found through the `yolotui.backends` entry-point group (a separate installable package can add
one: see docs/backends.md). A backend returns data and plans (ResumePlan, NewRunPlan, ChoiceRules); the job
layer and the TUI apply and render them the same way for every backend.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yolotui.errors import UserError
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


@dataclass(frozen=True)
class ResumeOptions:
    """What `yolotui resume` (or the resume wizard) asks of a run: options to change (None keeps the saved one),
    a checkpoint to restore over last.pt first (`from_ckpt`), process-layout flags, a SLURM request."""

    epochs: int | None = None
    batch_size: int | None = None
    device: str | None = None
    workers: int | None = None
    from_ckpt: str | None = None
    layout: dict[str, Any] = field(default_factory=dict)
    slurm: Any = None


# What a resume plan's write does; it returns notes for the user (or None).
Write = Callable[[], "list[str] | None"]


@dataclass
class ResumePlan:
    """How a backend resumes one run, decided with the run's lock held; yolotui.jobs.resume applies it.

    `writes` change the run's files (opt.yaml, run.yaml's command, a checkpoint's train_args ...) and run in
    order after the trust check, still under the lock. `spec` is the command to relaunch (with `name`,
    `device`, `env`, `cwd` and `extra` for run.yaml); None means the job layer's own training launch with
    `options`/`overrides` (yolotui's engine). `stored` names the run.yaml fields the relaunch runs as the
    folder holds them, when they differ from the backend's `resume_trusts`: those must be trusted (the seal in
    yolotui.runs.runconfig) before it runs.
    """

    verb: str = "resumed"
    notes: list[str] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
    spec: LaunchSpec | None = None
    name: str | None = None
    device: str | None = None
    options: dict[str, Any] | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    stored: tuple[str, ...] | None = None


@dataclass
class NewRunPlan:
    """A new run of another project's trainer, planned by its backend; yolotui.jobs.foreign starts it.

    The run folder is project/name (`exist_ok`: reuse it); `opt` is the backend's record for run.yaml and
    `argv` the trainer's own arguments (CommandRequest); `writes` make files the command needs first."""

    project: Path
    name: str
    exist_ok: bool
    opt: dict[str, Any]
    argv: list[str]
    cwd: Path
    device: str | None = None
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)


@dataclass(frozen=True)
class ChoiceRules:
    """How a backend narrows the resume wizard's generic choices: the choice keys it does not offer
    (`drop`), and a (key, label) choice put first (`first`), e.g. 'start over' when last.pt is unusable."""

    drop: frozenset[str] = frozenset()
    first: tuple[str, str] | None = None


def last_pt_only_rules(diagnosis: Any, start_over: str) -> ChoiceRules:
    """The rules of a trainer that resumes from its own weights/last.pt only: no --from, and `start_over` (the
    label of rerunning its original command) put first when that checkpoint is not usable."""
    from yolotui.health.report import RESTART
    from yolotui.health.verdict import FINISHED, RESUMABLE

    unusable = diagnosis.recommended == RESTART or diagnosis.last.verdict not in (RESUMABLE, FINISHED)
    return ChoiceRules(drop=frozenset({"from"}), first=("resume", start_over) if unusable else None)


class Backend(ABC):
    """One kind of trainer. Subclasses set `name` and `capabilities` and implement the four methods."""

    name: str = ""                      # run.yaml's `backend` value
    title: str = ""                     # how a message names its trainer ("the official trainer")
    label: str = ""                     # its short display name in tables ("engine", "command")
    capabilities: Capabilities = Capabilities()
    passes_unknown_args: bool = False   # `yolotui train --backend NAME` hands flags it does not know to the trainer
    takes_training_options: bool = False  # runs yolotui's training options (opt.yaml): `yolotui train`'s own path
    resume_trusts: tuple[str, ...] = ("command", "env", "logging")  # run.yaml fields a resume runs as stored

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

    def cli_flags(self, command: str) -> list[tuple[tuple[str, ...], dict[str, Any]]]:
        """The flags this backend adds to `yolotui train` or `yolotui finetune` (`command`), as argparse's
        add_argument names and keywords; a flag that several backends add is added once (the first one's)."""
        return []

    def cannot(self, capability: str) -> str | None:
        """Why this backend cannot do `capability` (save_now, mid_epoch_stop ...), or None when it can or says
        nothing (the CLI refuses with it, the TUI shows it instead of offering the action)."""
        return None

    def check_resume_options(self, run_dir: Path, options: ResumeOptions) -> None:
        """UserError for resume options that do not apply to this backend's runs (before the lock is claimed)."""
        if options.slurm is not None and not self.capabilities.distributed:
            raise UserError(f"--slurm does not go with a {self.name} run yet; resume it here")

    def prepare_resume(self, run_dir: Path, options: ResumeOptions) -> ResumePlan:
        """The plan that resumes (or extends) the run in `run_dir`; called with the run's lock held, before any
        write. UserError when it cannot resume. The default relaunches `resume_command`."""
        spec = self.resume_command(CommandRequest(run_dir=Path(run_dir), overrides=_changed(options)))
        return ResumePlan(spec=spec)

    def resume_usable(self, run_config: dict[str, Any]) -> bool:
        """Whether a retry (or a resume) may add run.yaml's `resume_args` (the supervisor asks before each
        relaunch); True unless the backend checks its checkpoint first."""
        return True

    def resume_rules(self, diagnosis: Any) -> ChoiceRules:
        """How the resume wizard's choices narrow for this run's doctor `diagnosis` (none by default)."""
        return ChoiceRules()

    def saved_batch_size(self, run_dir: Path) -> int | None:
        """The run's batch size where this backend records it outside opt.yaml (None: opt.yaml's)."""
        return None

    def tensorboard_folders(self, run_dir: Path) -> list[tuple[Path, str]]:
        """(folder, what it is) where this backend's trainer writes its own TensorBoard event files."""
        return []

    def doctor_advice(self, recommended: str, run_dir: Path, last: Any) -> tuple[str, str] | None:
        """(recommendation, the command that works) where this backend's doctor advice differs from the
        generic one; None keeps the generic advice."""
        return None

    def train_plan(self, args: Any, given: dict[str, Any]) -> NewRunPlan:
        """The new run that `yolotui train --backend NAME` asks for (`args`: the parsed flags; `given`: the
        training flags given); UserError for a backend that `yolotui train` cannot start."""
        raise UserError(f"--backend {self.name}: start it with `yolotui exec -- COMMAND`")

    def finetune_plan(self, args: Any) -> NewRunPlan:
        """The new run that `yolotui finetune --backend NAME` asks for; UserError when it cannot fine-tune."""
        raise UserError(f"--backend {self.name} cannot fine-tune; fine-tune with yolotui's engine")

    def recognise(self, argv: list[str], cwd: Path) -> tuple[Any, str] | None:
        """For `yolotui exec -- ARGV`: (what this backend makes of the command, a note) when it is this
        backend's trainer, else None."""
        return None

    def exec_plan(self, recognised: Any, project: Path | None, name: str | None, exist_ok: bool | None,
                  cwd: Path) -> NewRunPlan:
        """The new run for a command `recognise` claimed."""
        raise UserError(f"{self.name}: no exec launch")

    def finetunes_own_runs(self, run_dir: Path) -> bool:
        """True when a fine-tune from `run_dir` should run with this backend's trainer (the fine-tune wizard
        adds `--backend NAME`); False by default (yolotui's engine fine-tunes it)."""
        return False

    def finetune_source_options(self, checkpoint: Path, run_dir: Path | None) -> tuple[dict[str, Any], list[str]] | None:
        """Training options a fine-tune with yolotui's engine inherits from this backend's run or checkpoint,
        with notes; None when the source is not this backend's."""
        return None


def _changed(options: ResumeOptions) -> dict[str, Any]:
    """The resume options that change something."""
    return {k: v for k, v in (("epochs", options.epochs), ("batch_size", options.batch_size),
                              ("device", options.device), ("workers", options.workers)) if v is not None}
