"""Everything yolotui knows about the official YOLOv9 repository (WongKinYiu/yolov9), in one place.

- this package's OfficialBackend: the Backend (what yolotui asks of the official trainer);
- backend.py: command building, run folders, opt.yaml, whether last.pt is usable for the official --resume;
- resume.py / start.py: the resume plan, and new runs (train, exec, fine-tune) as plans;
- shim.py: runs the official `train_dual.py` in the user's interpreter and writes yolotui's events through
  shim_report.py (the reporter: events from the official trainer's own values) and the shim kit;
- weights.py: reading official checkpoints (pickled classes) into plain tensors, without unpickling code (torch);
- diagnosis.py / environment.py: doctor's view of an official run folder and of the interpreter that runs it;
- opt_edit.py: editing opt.yaml for a resumed attempt (the official --resume reads its options there).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from yolotui.backends.base import (
    REMEDY_ALLOC_CONF,
    REMEDY_DEVICE,
    REMEDY_HALVE_BATCH,
    REMEDY_NCCL_ENV,
    REMEDY_OPT_YAML,
    REMEDY_RETRY,
    REMEDY_WORKERS,
    Backend,
    Capabilities,
    ChoiceRules,
    CommandRequest,
    LaunchSpec,
    RunOutputs,
    last_pt_only_rules,
)
from yolotui.backends.official.backend import (
    CANNOT,
    NAME,
    SCRIPTS,
    OfficialCommand,
    recognise_command,
    resume_settings,
    resume_usable,
    save_dir,
    trainer_command,
)
from yolotui.errors import UserError
from yolotui.runs import layout


class OfficialBackend(Backend):
    """The official train_dual.py / train.py / train_triple.py of a checkout, through the shim."""

    name = NAME
    title = "the official trainer"
    label = "official"
    capabilities = Capabilities(save_now=False, mid_epoch_stop=False, resume=True, extend=True, lr_scale=False,
                                distributed=False)

    def new_run_command(self, request: CommandRequest) -> LaunchSpec:
        """The shim command for a new run: request.opt holds `python`, `repo`, `script`; request.argv the
        official flags (without --project/--name/--exist-ok, which point at request.run_dir)."""
        cmd = OfficialCommand(python=str(request.opt["python"]), repo=Path(request.opt["repo"]),
                              script=str(request.opt.get("script") or "train_dual.py"), args=list(request.argv))
        run_dir = Path(request.run_dir)
        extra = {"official": {"repo": str(cmd.repo), "script": cmd.script, "python": cmd.python,
                              "save_dir": str(run_dir), "args": list(cmd.args)},
                 **resume_settings(run_dir)}
        return LaunchSpec(command=trainer_command(cmd, run_dir, list(cmd.args)), extra=extra)

    passes_unknown_args = True  # `yolotui train --backend official`: the script's own flags pass through

    def cli_flags(self, command: str) -> list[tuple[tuple[str, ...], dict[str, Any]]]:
        """--repo, --python; and --script for `yolotui train`."""
        flags = [(("--repo",), {"default": None, "metavar": "PATH",
                                "help": "official backend: the YOLOv9 checkout (default: this folder, or the source "
                                        "run's for finetune)"}),
                 (("--python",), {"default": None, "metavar": "EXE",
                          "help": "official/ultralytics backend: the trainer's interpreter (default: this one)"})]
        if command == "train":
            flags.append((("--script",), {"default": "train_dual.py", "choices": list(SCRIPTS),
                                          "help": "official backend: which training script (default train_dual.py)"}))
        return flags

    def cannot(self, capability: str) -> str | None:
        """CANNOT above."""
        return CANNOT.get(capability)

    def check_resume_options(self, run_dir: Path, options: Any) -> None:
        """The official --resume takes weights/last.pt only, on this machine."""
        if options.from_ckpt or any((options.layout or {}).values()):
            raise UserError("an official run resumes from its weights/last.pt with the official --resume; "
                            "--from and the process-layout flags do not apply to it")
        if options.slurm is not None:
            raise UserError("--slurm does not go with an official-backend run yet; resume it here")

    def prepare_resume(self, run_dir: Path, options: Any) -> Any:
        """The official resume plan (yolotui/backends/official/resume.py)."""
        from yolotui.backends.official.resume import prepare_resume

        return prepare_resume(run_dir, options)

    def resume_usable(self, run_config: dict[str, Any]) -> bool:
        """`resume_usable` above: the official --resume only from a resumable last.pt."""
        return resume_usable(run_config)

    def resume_rules(self, diagnosis: Any) -> ChoiceRules:
        """Its --resume takes weights/last.pt only (no --from); without a usable one it starts over."""
        return last_pt_only_rules(diagnosis, "start over with the original official command (no usable last.pt; "
                                             "the official --resume needs one)")

    def tensorboard_folders(self, run_dir: Path) -> list[tuple[Path, str]]:
        """The official save_dir (the run folder for runs yolotui started)."""
        return [(save_dir(run_dir), "the official trainer's own event files")]

    def train_plan(self, args: Any, given: dict[str, Any]) -> Any:
        """yolotui/backends/official/start.py."""
        from yolotui.backends.official.start import train_plan

        return train_plan(args)

    def finetune_plan(self, args: Any) -> Any:
        """yolotui/backends/official/start.py."""
        from yolotui.backends.official.start import finetune_plan

        return finetune_plan(args)

    def recognise(self, argv: list[str], cwd: Path) -> tuple[Any, str] | None:
        """`python train_dual.py ...` of an official checkout."""
        found = recognise_command(argv, cwd)
        if found is None:
            return None
        return found, (f"recognised the official trainer ({found.script} in {found.repo}): supervised with the "
                       "official backend (progress, --resume on retries)")

    def exec_plan(self, recognised: Any, project: Path | None, name: str | None, exist_ok: bool | None,
                  cwd: Path) -> Any:
        """The same run as `yolotui train --backend official`."""
        from yolotui.backends.official.start import plan_start

        return plan_start(recognised, project=project, name=name, exist_ok=exist_ok, cwd=cwd)

    def resume_command(self, request: CommandRequest) -> LaunchSpec:
        """The run's own command with the official `--resume RUN/weights/last.pt` (added by the supervisor when
        that checkpoint is resumable, `resume_first`); changed options go to opt.yaml (resume.py)."""
        from yolotui.runs.runconfig import read_run_config

        config = read_run_config(Path(request.run_dir))
        extra = {**resume_settings(save_dir(request.run_dir)), "resume_first": True}
        return LaunchSpec(command=[str(a) for a in config["command"]], extra=extra)

    def remedies(self) -> frozenset[str]:
        """Retry (with --resume), halve the batch (in opt.yaml too), allocator and NCCL settings; no lr scale."""
        return frozenset({REMEDY_RETRY, REMEDY_HALVE_BATCH, REMEDY_ALLOC_CONF, REMEDY_NCCL_ENV, REMEDY_WORKERS,
                          REMEDY_OPT_YAML, REMEDY_DEVICE})

    def follow(self, run_dir: Path, probe: bool = True) -> Any:
        """An official train_dual.py run followed to the folder it writes (None for any other command)."""
        from yolotui.backends.official.diagnosis import official_run

        return official_run(run_dir, probe=probe)

    def outputs(self, run_dir: Path) -> RunOutputs:
        """The official save_dir's results.csv, weights/ and opt.yaml (the run folder for runs yolotui started)."""
        folder = save_dir(run_dir)
        return RunOutputs(results_csv=folder / layout.RESULTS_CSV, weights_dir=layout.weights_dir(folder),
                          opt_yaml=folder / layout.OPT_YAML)
