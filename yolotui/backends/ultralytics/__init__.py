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
- resume.py: the resume plan (verdict, extension, changed options) the job layer applies under the run's lock;
- start.py, cli.py: new runs (`yolotui train --backend ultralytics`, exec, fine-tune) as plans; what an engine
  fine-tune takes from an ultralytics run;
- remedies.py: what each failure class's remedy means here.

Capabilities: resume (epoch-granular, ultralytics' own resume=True from last.pt), extend (the checkpoint's
train_args epochs rewritten), save-now (through the shim, after the first epoch), no mid-epoch stop, no lr
scale, no multi-GPU launch from yolotui (ultralytics spawns its own DDP workers, which the shim does not
reach).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from yolotui.backends.base import (
    Backend,
    Capabilities,
    ChoiceRules,
    CommandRequest,
    LaunchSpec,
    RunOutputs,
    last_pt_only_rules,
)
from yolotui.backends.ultralytics.checkpoint import resume_usable
from yolotui.backends.ultralytics.launch import NAME, resume_settings, save_dir, trainer_command
from yolotui.backends.ultralytics.recognise import CLI, UltralyticsCommand, recognise_command
from yolotui.backends.ultralytics.remedies import REMEDIES
from yolotui.errors import UserError

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

    passes_unknown_args = True  # its key=value arguments pass through `yolotui train`

    def cli_flags(self, command: str) -> list[tuple[tuple[str, ...], dict[str, Any]]]:
        """--python; and --model for `yolotui train`."""
        flags: list[tuple[tuple[str, ...], dict[str, Any]]] = [
            (("--python",), {"default": None, "metavar": "EXE",
                          "help": "official/ultralytics backend: the trainer's interpreter (default: this one)"})]
        if command == "train":
            flags.append((("--model",), {"default": None, "metavar": "MODEL",
                                         "help": "ultralytics backend: the model, e.g. yolov9t.yaml or yolov9c.pt"}))
        return flags

    def cannot(self, capability: str) -> str | None:
        """CANNOT above (save-now works through the shim, so it is not refused)."""
        return CANNOT.get(capability) if capability != "save_now" else None

    def check_resume_options(self, run_dir: Path, options: Any) -> None:
        """ultralytics resumes from its weights/last.pt only, on this machine."""
        if options.from_ckpt or any((options.layout or {}).values()) or options.slurm is not None:
            raise UserError("an ultralytics run resumes from its weights/last.pt with ultralytics' resume; --from, "
                            "--slurm and the process-layout flags do not apply to it")

    def prepare_resume(self, run_dir: Path, options: Any) -> Any:
        """yolotui/backends/ultralytics/resume.py."""
        from yolotui.backends.ultralytics.resume import prepare_resume

        return prepare_resume(run_dir, options)

    def resume_usable(self, run_config: dict[str, Any]) -> bool:
        """ultralytics' resume only from a resumable last.pt (checkpoint.py)."""
        return resume_usable(run_config)

    def resume_rules(self, diagnosis: Any) -> ChoiceRules:
        """Resume from last.pt only (no --from); start the original command over when last.pt is not usable."""
        return last_pt_only_rules(diagnosis, "start over with the original ultralytics command (no usable last.pt: "
                                             "ultralytics resumes from last.pt only)")

    def saved_batch_size(self, run_dir: Path) -> int | None:
        """The batch from ultralytics' args.yaml (its save_dir)."""
        from yolotui.backends.ultralytics.launch import read_args_yaml

        value = read_args_yaml(save_dir(Path(run_dir))).get("batch")
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

    def doctor_advice(self, recommended: str, run_dir: Path, last: Any) -> tuple[str, str] | None:
        """ultralytics resumes from last.pt only, extends from last.pt or last.unstripped.pt, fine-tunes the rest."""
        from yolotui.backends.ultralytics.checkpoint import doctor_advice

        return doctor_advice(recommended, run_dir, last)

    def train_plan(self, args: Any, given: dict[str, Any]) -> Any:
        """cli.py."""
        from yolotui.backends.ultralytics.cli import train_plan

        return train_plan(args, given)

    def finetune_plan(self, args: Any) -> Any:
        """start.py."""
        from yolotui.backends.ultralytics.start import finetune_plan

        return finetune_plan(args)

    def recognise(self, argv: list[str], cwd: Path) -> tuple[Any, str] | None:
        """`yolo train ...`, `python -m ultralytics ...` or a script that calls YOLO(...).train."""
        found = recognise_command(argv)
        if found is None:
            return None
        return found, ("recognised an ultralytics training: supervised with the ultralytics backend (progress, "
                       "ultralytics' resume from last.pt on retries)")

    def exec_plan(self, recognised: Any, project: Path | None, name: str | None, exist_ok: bool | None,
                  cwd: Path) -> Any:
        """The same run as `yolotui train --backend ultralytics`."""
        from yolotui.backends.ultralytics.start import plan_start

        return plan_start(recognised, project=project, name=name, exist_ok=exist_ok, cwd=cwd)

    def finetunes_own_runs(self, run_dir: Path) -> bool:
        """An ultralytics run fine-tunes with ultralytics."""
        from yolotui.backends.ultralytics.start import is_ultralytics_run

        return is_ultralytics_run(run_dir)

    def finetune_source_options(self, checkpoint: Path, run_dir: Path | None) -> tuple[dict[str, Any], list[str]] | None:
        """An ultralytics YOLOv9 run or checkpoint maps onto the engine's gelan-* (start.py)."""
        from yolotui.backends.ultralytics.start import engine_finetune_options, is_ultralytics_run

        if not (is_ultralytics_run(run_dir) or _is_ultralytics_checkpoint(checkpoint)):
            return None
        return engine_finetune_options(checkpoint, run_dir)

    def outputs(self, run_dir: Path) -> RunOutputs:
        """ultralytics' save_dir (the run folder for runs yolotui started): results.csv, weights/, args.yaml."""
        folder = save_dir(run_dir)
        return RunOutputs(results_csv=folder / "results.csv", weights_dir=folder / "weights",
                          opt_yaml=folder / "args.yaml")


def _is_ultralytics_checkpoint(path: Path) -> bool:
    """True when the scan of `path` finds ultralytics' checkpoint layout."""
    from yolotui.health.checkpoint import ULTRALYTICS, inspect_checkpoint

    return inspect_checkpoint(path, verify_hash=False).kind == ULTRALYTICS


def describe(run_config: dict[str, Any]) -> str:
    """One line naming what the run trains (for notes): the model and data of its ultralytics arguments."""
    recorded = run_config.get(NAME) if isinstance(run_config.get(NAME), dict) else {}
    if recorded.get("mode") == "script":
        return f"the script {recorded.get('script')}"
    from yolotui.backends.ultralytics.recognise import parse_overrides

    given = parse_overrides([str(a) for a in recorded.get("args") or []])
    return f"model {given.get('model', '?')} on {given.get('data', '?')}"


__all__ = ["CANNOT", "UltralyticsBackend", "describe"]
