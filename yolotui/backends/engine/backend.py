"""The `yolotui` backend: yolotui's own trainer (`python -m yolotui.engine train --run-dir RUN`).

It reads opt.yaml and hyp.yaml from the run folder, writes the official layout there (results.csv,
weights/last.pt and best.pt), checkpoints on SIGUSR1 and mid-epoch on a graceful stop, and resumes at the
next batch. Several processes run it under torchrun (`python -m torch.distributed.run ...`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from yolotui.backends.base import (
    ALL_REMEDIES,
    Backend,
    Capabilities,
    CommandRequest,
    LaunchSpec,
    RunOutputs,
)
from yolotui.placement.distributed import DistributedLaunch
from yolotui.runs import layout as run_layout


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


class EngineBackend(Backend):
    """yolotui's own PyTorch YOLOv9 trainer."""

    name = "yolotui"
    label = "engine"
    takes_training_options = True
    resume_trusts = ("logging",)  # its command is rebuilt from opt.yaml; the logging config is carried over
    capabilities = Capabilities(save_now=True, mid_epoch_stop=True, resume=True, extend=True, lr_scale=True,
                                distributed=True)

    def _spec(self, request: CommandRequest, overrides: dict[str, Any] | None) -> LaunchSpec:
        from yolotui.config import opt_yaml_dict
        from yolotui.placement.distributed import DistributedLaunch as Layout

        layout = request.layout or Layout()
        return LaunchSpec(command=engine_command(request.run_dir, overrides, launch=layout), env=layout.env(),
                          extra={"options": opt_yaml_dict(request.opt), "save_signal": True})

    def new_run_command(self, request: CommandRequest) -> LaunchSpec:
        """`python -m yolotui.engine train --run-dir RUN` (under torchrun for several processes)."""
        return self._spec(request, None)

    def resume_command(self, request: CommandRequest) -> LaunchSpec:
        """The same command with the changed options as flags; the trainer finds weights/last.pt itself."""
        return self._spec(request, request.overrides)

    def prepare_resume(self, run_dir: Path, options: Any) -> Any:
        """The engine's resume plan: checked and written under the run's lock (yolotui/backends/engine/resume.py)."""
        from yolotui.backends.engine.resume import prepare_resume

        return prepare_resume(run_dir, options)

    def check_resume_options(self, run_dir: Path, options: Any) -> None:
        """Every resume option applies to the engine (--from, the layout flags, --slurm)."""

    def remedies(self) -> frozenset[str]:
        """All of them: it takes --batch-size, --accumulate and --lr-scale and resumes exactly."""
        return ALL_REMEDIES

    def outputs(self, run_dir: Path) -> RunOutputs:
        """The official layout, in the run folder itself."""
        run_dir = Path(run_dir)
        return RunOutputs(results_csv=run_dir / run_layout.RESULTS_CSV, weights_dir=run_layout.weights_dir(run_dir),
                          opt_yaml=run_dir / run_layout.OPT_YAML)
