"""The `exec` backend: any command the user gives (`yolotui exec -- CMD ...`), supervised as it is.

yolotui knows nothing of its outputs: it may write results.csv and weights/ into the run folder (then the
TUI shows them), or not. Retries, and `yolotui resume`, rerun the same command (plus run.yaml's `resume_args`,
if set); a batch
flag on its command line is halved on an out-of-memory failure. `save_signal: true` in run.yaml (the
`--save-signal` flag) says the command writes a checkpoint on SIGUSR1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from yolotui.backends.base import (
    REMEDY_ALLOC_CONF,
    REMEDY_HALVE_BATCH,
    REMEDY_NCCL_ENV,
    REMEDY_RETRY,
    Backend,
    Capabilities,
    ChoiceRules,
    CommandRequest,
    LaunchSpec,
    RunOutputs,
)
from yolotui.errors import UserError
from yolotui.runs import layout as run_layout


class ExecBackend(Backend):
    """A generic supervised command."""

    name = "exec"
    label = "command"
    capabilities = Capabilities()

    def new_run_command(self, request: CommandRequest) -> LaunchSpec:
        """The user's argv, unchanged."""
        if not request.argv:
            raise UserError("no command given: put it after '--', e.g. yolotui exec -- python train.py")
        return LaunchSpec(command=list(request.argv))

    def resume_command(self, request: CommandRequest) -> LaunchSpec:
        """The run's own command again (with run.yaml's `resume_args`, if any: `resume_first`), its env and
        working folder; a generic command takes no changed options."""
        from yolotui.runs.runconfig import read_run_config

        if request.overrides:
            flags = ", ".join("--" + k.replace("_", "-") for k in sorted(request.overrides))
            raise UserError(f"{flags}: an exec run reruns its own command unchanged; give its own flags with a new "
                            "`yolotui exec -- COMMAND`")
        config = read_run_config(Path(request.run_dir))
        return LaunchSpec(command=[str(a) for a in config.get("command") or []],
                          env={str(k): str(v) for k, v in (config.get("env") or {}).items()},
                          cwd=Path(config["cwd"]) if config.get("cwd") else None, extra={"resume_first": True})

    def check_resume_options(self, run_dir: Path, options: Any) -> None:
        """--from and the process-layout flags are yolotui engine options; --slurm resubmits as recorded."""
        if options.from_ckpt or any((options.layout or {}).values()):
            raise UserError("an exec run reruns its own command: --from and the process-layout flags do not apply")

    def resume_rules(self, diagnosis: Any) -> ChoiceRules:
        """One way to resume, whatever checkpoints the command left: rerun it unchanged (what `yolotui resume`
        does), never from another checkpoint or with another batch size or epoch count."""
        return ChoiceRules(drop=frozenset({"resume", "from", "smaller-batch", "extend"}),
                           first=("resume", "run its command again, unchanged (an exec run's own resume, if any, "
                                            "is up to the command)"))

    def doctor_advice(self, recommended: str, run_dir: Path, last: Any) -> tuple[str, str] | None:
        """Without a usable checkpoint, the way to start again is its own resume: the command rerun unchanged."""
        from yolotui.health.report import RESTART

        if recommended != RESTART:
            return None
        return recommended, f"`yolotui resume {Path(run_dir).name}` reruns its command unchanged"

    def tensorboard_folders(self, run_dir: Path) -> list[tuple[Path, str]]:
        """An official trainer followed under exec (run.yaml's `official` record) writes its own event files where
        the official one does."""
        from yolotui.backends.official.backend import save_dir
        from yolotui.runs.runconfig import run_yaml_field

        if not isinstance(run_yaml_field(Path(run_dir), "official"), dict):
            return []
        return [(save_dir(run_dir), "the official trainer's own event files")]

    def remedies(self) -> frozenset[str]:
        """Rerun with backoff, halve a --batch/--batch-size on its command line, set the allocator/NCCL env."""
        return frozenset({REMEDY_RETRY, REMEDY_HALVE_BATCH, REMEDY_ALLOC_CONF, REMEDY_NCCL_ENV})

    def follow(self, run_dir: Path, probe: bool = True) -> Any:
        """An official train_dual.py run followed to the folder it writes (None for any other command)."""
        from yolotui.backends.official.diagnosis import official_run

        return official_run(run_dir, probe=probe)

    def outputs(self, run_dir: Path) -> RunOutputs:
        """Where yolotui looks: the run folder's official layout, if the command writes it."""
        run_dir = Path(run_dir)
        return RunOutputs(results_csv=run_dir / run_layout.RESULTS_CSV, weights_dir=run_layout.weights_dir(run_dir),
                          opt_yaml=run_dir / run_layout.OPT_YAML)
