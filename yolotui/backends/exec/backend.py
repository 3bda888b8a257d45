"""The `exec` backend: any command the user gives (`yolotui exec -- CMD ...`), supervised as it is.

yolotui knows nothing of its outputs: it may write results.csv and weights/ into the run folder (then the
TUI shows them), or not. Retries rerun the same command (plus run.yaml's `resume_args`, if set); a batch
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
        """A generic command has no resume of its own: start it again with `yolotui exec`."""
        raise UserError(f"{request.run_dir}: an exec run cannot be resumed by yolotui; start the command again "
                        "with `yolotui exec` (its own resume flags, if any, go after `--`)")

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
