"""`yolotui train`: start YOLOv9 training detached under the supervisor, with train_dual.py's flags.

The official README's command works unchanged (`yolotui train --batch 16 --epochs 500 --img 640 --device 0
--data data.yaml --cfg models/detect/yolov9-c.yaml --hyp hyp.scratch-high.yaml ...`). Everything is checked
before anything detaches; the command prints the run folder and returns (`--attach` follows in plain text,
Ctrl-C detaches; `--json` prints the run as JSON). `--resume [RUN|PATH]` resumes instead (see `yolotui
resume`). Several GPUs (`--device 0,1`), CPU processes (`--device cpu --nproc-per-node N`) and several
machines (`--nnodes`, `--node-rank`, `--rdzv-endpoint`) run the trainer under torchrun
(yolotui.placement.distributed). The work itself is yolotui.jobs.new_run and yolotui.jobs.resume.
"""

from __future__ import annotations

import argparse
from typing import Any

from yolotui.commands._distributed import add_distributed_flags
from yolotui.commands._options import BATCH_FLAGS, IMGSZ_FLAGS, add_aliased, add_json

DATA, MODEL, SCHEDULE, HARDWARE, RUN_CONTROL, RECOVERY = (
    "data", "model", "schedule", "hardware", "run control", "recovery")

# (flags, argparse keyword arguments) for every training option, official names first; the first flag is the
# one shown in help, the others are hidden aliases.
TRAIN_FLAGS: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (("--weights",), {"help": "initial weights: a yolotui checkpoint or an official YOLOv9 .pt"}),
    (("--cfg",), {"help": "model YAML: a path or a shipped name (yolov9-s, models/detect/yolov9-c.yaml)"}),
    (("--data",), {"help": "data.yaml path"}),
    (("--hyp",), {"help": "hyperparameters YAML (default: hyp.short-run.yaml for runs under 1000 optimizer steps, else the official hyp.scratch-high.yaml)"}),
    (("--epochs",), {"type": int, "help": "total training epochs (default 100)"}),
    (BATCH_FLAGS, {"dest": "batch_size", "type": int, "help": "total batch size (default 16)"}),
    (IMGSZ_FLAGS, {"dest": "imgsz", "type": int, "help": "image size (default 640)"}),
    (("--device",), {"help": "cuda device: 0, 0,1 or cpu (default: first GPU, else cpu)"}),
    (("--workers",), {"type": int, "help": "data loader workers (default 8)"}),
    (("--project",), {"help": "parent folder of runs (default runs/train)"}),
    (("--name",), {"help": "run folder name (default exp; numbered when taken)"}),
    (("--exist-ok",), {"action": "store_true", "help": "reuse project/name instead of numbering"}),
    (("--close-mosaic",), {"type": int, "help": "turn mosaic off for the last N epochs"}),
    (("--min-items",), {"type": int, "help": "skip training images with fewer labels"}),
    (("--freeze",), {"nargs": "+", "help": "freeze the first N layers, the layers listed, or 'backbone'"}),
    (("--cos-lr",), {"action": "store_true", "help": "cosine LR schedule"}),
    (("--flat-cos-lr",), {"action": "store_true", "help": "flat then cosine LR schedule"}),
    (("--fixed-lr",), {"action": "store_true", "help": "constant LR"}),
    (("--label-smoothing",), {"type": float, "help": "label smoothing epsilon"}),
    (("--patience",), {"type": int, "help": "early stop after N epochs without improvement (0: never)"}),
    (("--save-period",), {"type": int, "help": "also save weights/epoch{N}.pt every N epochs"}),
    (("--seed",), {"type": int, "help": "global training seed"}),
    (("--optimizer",), {"choices": ["SGD", "Adam", "AdamW"], "help": "optimizer (default SGD)"}),
    (("--cache",), {"nargs": "?", "const": "ram", "help": "cache decoded images: ram (when given alone) or disk"}),
    (("--single-cls",), {"action": "store_true", "help": "train as a single class"}),
    (("--save-period-min",), {"type": float, "help": "minutes between mid-epoch last.pt saves (default 10)"}),
    (("--sync-bn",), {"action": "store_true", "help": "SyncBatchNorm across the GPUs of a multi-GPU (DDP) run"}),
    (("--precision",), {"choices": ["auto", "fp32"],
                        "help": "auto (default): fp16 AMP on CUDA, bf16 autocast on CPUs with native bf16; fp32: off"}),
    (("--compile",), {"action": "store_true",
                      "help": "torch.compile the model for training (CUDA: usually faster after a compile of a "
                              "minute or two; off by default, little gain on a CPU)"}),
]

# The help group of each training option (by its first flag).
FLAG_GROUPS: dict[str, str] = {
    "--data": DATA, "--imgsz": DATA, "--cache": DATA, "--single-cls": DATA, "--min-items": DATA,
    "--weights": MODEL, "--cfg": MODEL, "--hyp": MODEL, "--freeze": MODEL,
    "--epochs": SCHEDULE, "--batch-size": SCHEDULE, "--close-mosaic": SCHEDULE, "--cos-lr": SCHEDULE,
    "--flat-cos-lr": SCHEDULE, "--fixed-lr": SCHEDULE, "--label-smoothing": SCHEDULE, "--patience": SCHEDULE,
    "--seed": SCHEDULE, "--optimizer": SCHEDULE,
    "--device": HARDWARE, "--workers": HARDWARE, "--sync-bn": HARDWARE,
    "--precision": HARDWARE, "--compile": HARDWARE,
    "--project": RUN_CONTROL, "--name": RUN_CONTROL, "--exist-ok": RUN_CONTROL, "--save-period": RUN_CONTROL,
    "--save-period-min": RUN_CONTROL,
}
GROUP_TITLES = {
    DATA: "data", MODEL: "model", SCHEDULE: "schedule (epochs, batch, learning rate)",
    HARDWARE: "hardware (devices, processes, machines)", RUN_CONTROL: "run control (where it lives, how it is followed)",
    RECOVERY: "recovery (resume, restarts after failures)",
}


def add_training_flags(parser: argparse.ArgumentParser, hidden: bool = False,
                       groups: dict[str, Any] | None = None) -> None:
    """Register TRAIN_FLAGS with SUPPRESS defaults, so `vars(args)` holds only the flags actually given.

    `groups` maps a group name (FLAG_GROUPS values) to an argparse argument group to put the flag in.
    """
    for flags, kwargs in TRAIN_FLAGS:
        options = {**kwargs, "default": argparse.SUPPRESS}
        if hidden:
            options["help"] = argparse.SUPPRESS
        target = (groups or {}).get(FLAG_GROUPS.get(flags[0], ""), parser)
        add_aliased(target, flags, **options)


def given_options(args: argparse.Namespace) -> dict[str, Any]:
    """The training options present on the command line, under their dest names."""
    from yolotui.config import TRAIN_DEFAULTS

    return {k: v for k, v in vars(args).items() if k in TRAIN_DEFAULTS}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Official train_dual.py flags plus --resume, --attach, --json, --max-restarts/--max-attempts,
    --restart-backoff, grouped in help as data, model, schedule, hardware, run control, recovery."""
    groups = {name: parser.add_argument_group(title) for name, title in GROUP_TITLES.items()}
    add_training_flags(parser, groups=groups)
    add_distributed_flags(groups[HARDWARE])
    control, recovery = groups[RUN_CONTROL], groups[RECOVERY]
    control.add_argument("--attach", action="store_true", help="follow progress here; Ctrl-C detaches")
    add_json(control)
    recovery.add_argument("--resume", nargs="?", const=True, default=False, metavar="RUN|PATH",
                          help="resume a run (none given: the newest interrupted one)")
    recovery.add_argument("--max-restarts", type=int, default=None, metavar="N",
                          help="restart after a failure up to N times, as yolotui exec (default 4: 5 attempts)")
    recovery.add_argument("--max-attempts", type=int, default=None, metavar="N",
                          help="attempts in all, the first included (default 5); or give --max-restarts")
    queue = parser.add_argument_group("queue (start later, when another run ends or GPUs are free)")
    queue.add_argument("--after", metavar="RUN", default=None,
                       help="start when RUN has ended (finished, failed or stopped); queued until then")
    queue.add_argument("--after-ok", action="store_true", help="with --after: start only if RUN finished")
    queue.add_argument("--when-free", nargs="?", const="", default=None, metavar="MEM",
                       help="start when the --device GPUs have MEM free (e.g. 20G; none given: no process on "
                            "them) and no other yolotui run holds them")
    from yolotui.commands._slurm import add_slurm_flags

    add_slurm_flags(parser)
    recovery.add_argument("--restart-backoff", type=float, default=None, metavar="S",
                          help="seconds before the first retry, doubling for crashes and comm errors (default 2)")
    from yolotui.commands._runflags import add_run_flags

    add_run_flags(recovery)
    from yolotui.commands._trackerflags import add_tracker_flags

    add_tracker_flags(parser)
    from yolotui.backends import backend_names

    others = parser.add_argument_group("other trainers (--backend NAME: official, ultralytics, an installed one)")
    others.add_argument("--backend", choices=backend_names(), default="yolotui",
                        help="yolotui: the built-in engine (default); official: train_dual.py of --repo (other flags "
                             "go to its script); ultralytics: ultralytics' trainer (--model, key=value arguments "
                             "pass through); or an installed backend package's name")
    add_backend_flags(others, "train")


def add_backend_flags(group: Any, command: str) -> None:
    """The flags each backend adds to `yolotui COMMAND` (Backend.cli_flags), each once."""
    from yolotui.backends import backend_names, get_backend
    from yolotui.errors import UserError

    seen: set[str] = set()
    for name in backend_names():
        try:
            flags = get_backend(name).cli_flags(command)
        except UserError:  # an installed backend that cannot be loaded adds nothing (using it says why)
            continue
        for names, keywords in flags:
            if not seen.intersection(names):
                seen.update(names)
                group.add_argument(*names, **keywords)


def run(args: argparse.Namespace) -> int:
    """Validate, create the run folder, launch the trainer detached, print the folder."""
    from yolotui.backends import get_backend
    from yolotui.commands._distributed import given_layout
    from yolotui.commands._launch import after_launch
    from yolotui.commands._runflags import extras_from
    from yolotui.commands._slurm import slurm_options
    from yolotui.jobs.launch import restart_limit

    slurm = slurm_options(args)
    backend = get_backend(getattr(args, "backend", None))
    if not backend.takes_training_options:
        return run_planned(args, backend, slurm)
    given, layout, extras = given_options(args), given_layout(args), extras_from(args)
    if args.resume is not False and (args.after or args.after_ok or args.when_free is not None):
        from yolotui.errors import UserError

        raise UserError("--after/--after-ok/--when-free queue a new run; they cannot be given with --resume")
    if args.resume is not False:
        from yolotui.commands._launch import ask_on_terminal
        from yolotui.jobs.resume import RESUME_CHANGEABLE, ResumeRequest, refuse_unchangeable, resume

        refuse_unchangeable(given, "cannot be given with --resume: a resumed run keeps its options; only "
                                   "--epochs, --batch-size, --device and --workers may change")
        target = None if args.resume is True else str(args.resume)
        result = resume(ResumeRequest(target, **{k: given.get(k) for k in RESUME_CHANGEABLE}, layout=layout,
                                      extras=extras, slurm=slurm, confirm=ask_on_terminal))
        return after_launch(result, args.attach, args.json, show_command=True)
    from yolotui.jobs.new_run import NewRunRequest, new_run

    max_attempts = restart_limit(args.max_restarts, args.max_attempts)
    from yolotui.jobs.queue import QueueRequest

    queue = QueueRequest(after=args.after, after_ok=args.after_ok, when_free=args.when_free)
    result = new_run(NewRunRequest(given, layout, max_attempts=max_attempts, backoff_s=args.restart_backoff,
                                   queue=queue if queue.wanted() else None, extras=extras, slurm=slurm))
    return after_launch(result, args.attach, args.json)


def run_planned(args: argparse.Namespace, backend: Any, slurm: Any) -> int:
    """`yolotui train --backend NAME` for another project's trainer: its backend plans the run from the flags."""
    from yolotui.commands._launch import after_launch
    from yolotui.commands._runflags import extras_from
    from yolotui.errors import UserError
    from yolotui.jobs.foreign import start_planned
    from yolotui.jobs.launch import restart_limit

    if args.resume is not False:
        raise UserError(f"resume a {backend.name} run with `yolotui resume RUN` (it continues from its "
                        "weights/last.pt)")
    if slurm is not None:
        raise UserError(f"--slurm runs yolotui's own trainer (or `yolotui exec --slurm -- COMMAND`); it does not go "
                        f"with --backend {backend.name} yet")
    if args.restart_backoff is not None and args.restart_backoff < 0:
        raise UserError(f"--restart-backoff {args.restart_backoff:g}: must be 0 or more seconds")
    plan = backend.train_plan(args, given_options(args))
    result = start_planned(backend.name, plan, max_attempts=restart_limit(args.max_restarts, args.max_attempts),
                           backoff_s=args.restart_backoff, extras=extras_from(args))
    return after_launch(result, args.attach, args.json)
