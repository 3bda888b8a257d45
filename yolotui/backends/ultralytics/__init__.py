"""The `ultralytics` backend: ultralytics' trainer (`yolo train ...`, `YOLO(...).train(...)`) supervised by
yolotui.

ultralytics is AGPL-3.0: yolotui never imports it. The trainer is a separate process, the user's interpreter
running the shim (shim.py), which hooks ultralytics' callbacks and writes yolotui's events. One module per
job:

- recognise.py: `yolotui exec -- yolo train ...` (also `yolo detect train`, `python -m ultralytics`, and a
  Python script that calls `YOLO(...).train`) is told apart from any other command;
- launch.py: the supervised argv, the run folder (= ultralytics' save_dir, recorded in run.yaml as
  `ultralytics.save_dir`), the resume entries, the epochs rewrite that extends a run;
- shim.py: the in-process shim (standard library only in yolotui's part), with shim_files.py, shim_hooks.py and
  shim_safety.py beside it, all loaded by path through the shim kit (yolotui/backends/shimkit.py);
- checkpoint.py: torch-free verdicts (resume_usable for the supervisor, extend_source);
- remedies.py: what each failure class's remedy means here.

Capabilities: resume (epoch-granular, ultralytics' own resume=True from last.pt), extend (the checkpoint's
train_args epochs rewritten), save-now (through the shim, after the first epoch), no mid-epoch stop, no lr
scale, no multi-GPU launch from yolotui (ultralytics spawns its own DDP workers, which the shim does not
reach).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from yolotui.backends.base import Backend, Capabilities, CommandRequest, LaunchSpec, RunOutputs
from yolotui.backends.ultralytics.checkpoint import resume_usable
from yolotui.backends.ultralytics.launch import NAME, resume_settings, trainer_command
from yolotui.backends.ultralytics.recognise import CLI, UltralyticsCommand, recognise_command
from yolotui.backends.ultralytics.remedies import REMEDIES

CANNOT = {
    "save_now": "ultralytics resumes only after a finished epoch: in the first epoch save-now writes nothing; later "
                "it writes the weights now as a checkpoint of the last finished epoch (a resume redoes the epoch in "
                "progress)",
    "mid_epoch_stop": "stopping an ultralytics run loses the epoch in progress: it resumes from the last epoch's "
                      "last.pt (ultralytics resumes at epoch boundaries)",
    "lr_scale": "ultralytics has no learning-rate scale: a nan resume restarts at the same lr",
    "distributed": "yolotui launches ultralytics on one process; for several GPUs ultralytics spawns its own DDP "
                   "workers (device=0,1), which yolotui's shim does not follow",
}


def save_dir(run_dir: Path) -> Path:
    """Where ultralytics writes for this run: run.yaml's ultralytics.save_dir, else the run folder."""
    from yolotui.runs.runconfig import run_yaml_field

    recorded = run_yaml_field(Path(run_dir), NAME)
    folder = recorded.get("save_dir") if isinstance(recorded, dict) else None
    return Path(folder) if folder else Path(run_dir)


class UltralyticsBackend(Backend):
    """ultralytics' trainer, through the shim."""

    name = NAME
    label = "ultralytics"
    capabilities = Capabilities(save_now=True, mid_epoch_stop=False, resume=True, extend=True, lr_scale=False,
                                distributed=False)

    def new_run_command(self, request: CommandRequest) -> LaunchSpec:
        """The shim command for a new run: request.opt holds `python`, `mode` and `script`; request.argv the
        ultralytics arguments (cli) or the script's arguments."""
        script = request.opt.get("script")
        cmd = UltralyticsCommand(python=str(request.opt["python"]), mode=str(request.opt.get("mode") or CLI),
                                 args=list(request.argv), script=Path(script) if script else None)
        run_dir = Path(request.run_dir)
        extra = {NAME: {"python": cmd.python, "mode": cmd.mode, "script": str(cmd.script) if cmd.script else None,
                        "args": list(cmd.args), "save_dir": str(run_dir)},
                 "save_signal": True, **resume_settings(run_dir)}
        return LaunchSpec(command=trainer_command(cmd, run_dir), extra=extra)

    def resume_command(self, request: CommandRequest) -> LaunchSpec:
        """The run's own command; the supervisor adds the ultralytics resume from last.pt when it is resumable
        (`resume_first`), with the changed batch, workers or device (request.overrides)."""
        from yolotui.runs.runconfig import read_run_config

        config = read_run_config(Path(request.run_dir))
        overrides = request.overrides or {}
        extra = {**resume_settings(save_dir(request.run_dir), batch=overrides.get("batch_size"),
                                   workers=overrides.get("workers"), device=overrides.get("device")),
                 "resume_first": True}
        return LaunchSpec(command=[str(a) for a in config["command"]], extra=extra)

    def remedies(self) -> frozenset[str]:
        """Retry (with the ultralytics resume), halve the batch, allocator and NCCL settings; no lr scale."""
        return REMEDIES

    def outputs(self, run_dir: Path) -> RunOutputs:
        """ultralytics' save_dir (the run folder for runs yolotui started): results.csv, weights/, args.yaml."""
        folder = save_dir(run_dir)
        return RunOutputs(results_csv=folder / "results.csv", weights_dir=folder / "weights",
                          opt_yaml=folder / "args.yaml")


def describe(run_config: dict[str, Any]) -> str:
    """One line naming what the run trains (for notes): the model and data of its ultralytics arguments."""
    recorded = run_config.get(NAME) if isinstance(run_config.get(NAME), dict) else {}
    if recorded.get("mode") == "script":
        return f"the script {recorded.get('script')}"
    from yolotui.backends.ultralytics.recognise import parse_overrides

    given = parse_overrides([str(a) for a in recorded.get("args") or []])
    return f"model {given.get('model', '?')} on {given.get('data', '?')}"


__all__ = ["CANNOT", "NAME", "UltralyticsBackend", "UltralyticsCommand", "describe", "recognise_command",
           "resume_usable", "save_dir"]
