"""`yolotui train`: start YOLOv9 training detached under the supervisor, with train_dual.py's flags.

The official README's command works unchanged (`yolotui train --batch 16 --epochs 500 --img 640 --device 0
--data data.yaml --cfg models/detect/yolov9-c.yaml --hyp hyp.scratch-high.yaml ...`). Everything is checked
before anything detaches; the command prints the run folder and returns (`--attach` follows in plain text,
Ctrl-C detaches). `--resume [RUN|PATH]` resumes instead (see `yolotui resume`). Several GPUs (`--device 0,1`),
CPU processes (`--device cpu --nproc-per-node N`) and several machines (`--nnodes`, `--node-rank`,
`--rdzv-endpoint`) run the trainer under torchrun (see yolotui.commands._distributed).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from yolotui.commands._distributed import add_distributed_flags

# (flags, argparse keyword arguments) for every training option, official names first.
TRAIN_FLAGS: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (("--weights",), {"help": "initial weights: a yolotui checkpoint or an official YOLOv9 .pt"}),
    (("--cfg",), {"help": "model YAML: a path or a shipped name (yolov9-s, models/detect/yolov9-c.yaml)"}),
    (("--data",), {"help": "data.yaml path"}),
    (("--hyp",), {"help": "hyperparameters YAML (default: the shipped hyp.scratch-high.yaml)"}),
    (("--epochs",), {"type": int, "help": "total training epochs (default 100)"}),
    (("--batch-size", "--batch"), {"dest": "batch_size", "type": int, "help": "total batch size (default 16)"}),
    (("--imgsz", "--img", "--img-size"), {"dest": "imgsz", "type": int, "help": "image size (default 640)"}),
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
    (("--cache",), {"nargs": "?", "const": "ram", "help": "cache images in ram"}),
    (("--single-cls",), {"action": "store_true", "help": "train as a single class"}),
    (("--save-period-min",), {"type": float, "help": "minutes between mid-epoch last.pt saves (default 10)"}),
    (("--sync-bn",), {"action": "store_true", "help": "SyncBatchNorm across the GPUs of a multi-GPU (DDP) run"}),
]
RESUME_CHANGEABLE = ("epochs", "batch_size", "device", "workers")


def add_training_flags(parser: argparse.ArgumentParser, hidden: bool = False) -> None:
    """Register TRAIN_FLAGS with SUPPRESS defaults, so `vars(args)` holds only the flags actually given."""
    for flags, kwargs in TRAIN_FLAGS:
        options = {**kwargs, "default": argparse.SUPPRESS}
        if hidden:
            options["help"] = argparse.SUPPRESS
        parser.add_argument(*flags, **options)


def given_options(args: argparse.Namespace) -> dict[str, Any]:
    """The training options present on the command line, under their dest names."""
    from yolotui.config import TRAIN_DEFAULTS

    return {k: v for k, v in vars(args).items() if k in TRAIN_DEFAULTS}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Official train_dual.py flags plus --resume, --attach, --max-restarts/--max-attempts, --restart-backoff."""
    add_training_flags(parser)
    add_distributed_flags(parser)
    from yolotui.commands._runflags import add_run_flags

    add_run_flags(parser)
    parser.add_argument("--resume", nargs="?", const=True, default=False, metavar="RUN|PATH",
                        help="resume a run (none given: the newest interrupted one)")
    parser.add_argument("--attach", action="store_true", help="follow progress here; Ctrl-C detaches")
    parser.add_argument("--max-restarts", type=int, default=None, metavar="N",
                        help="restart after a failure up to N times, as yolotui exec (default 4: 5 attempts)")
    parser.add_argument("--max-attempts", type=int, default=None, metavar="N",
                        help="attempts in all, the first included (default 5); or give --max-restarts")
    parser.add_argument("--restart-backoff", type=float, default=None, metavar="S",
                        help="seconds before the first retry, doubling for crashes and comm errors (default 2)")


def prepare_run(opt_given: dict[str, Any]) -> tuple[Path, dict[str, Any], dict[str, Any], list[str]]:
    """Validate options, create the run folder, write opt.yaml and hyp.yaml; (run_dir, opt, hyp, warnings)."""
    from yolotui.commands._launch import write_run_files
    from yolotui.config import default_options, load_hyp, validate_options
    from yolotui.errors import UserError
    from yolotui.runs import layout, store

    opt, warnings = validate_options(default_options(**opt_given))
    if opt["weights"]:
        from yolotui.commands._weights_check import check_weights_file

        warnings += check_weights_file(opt["weights"])
    hyp = load_hyp(Path(opt["hyp"]))
    project = Path(str(opt["project"])).expanduser()
    store.validate_name(str(opt["name"]))
    if opt["exist_ok"] and (project / str(opt["name"]) / layout.WEIGHTS_DIR / layout.LAST_PT).exists():
        raise UserError(f"{project / str(opt['name'])} already holds weights/last.pt: resume it with "
                        f"`yolotui resume {project / str(opt['name'])}` or choose another --name")
    run_dir = store.create_run_dir(project, str(opt["name"]), exist_ok=bool(opt["exist_ok"]))
    opt["save_dir"] = str(run_dir)
    write_run_files(run_dir, opt, hyp)
    return run_dir, opt, hyp, warnings


def restart_limit(max_restarts: int | None, max_attempts: int | None) -> int:
    """Attempts in all from --max-restarts N (N + 1) or --max-attempts N (N); default 5."""
    from yolotui.commands._launch import DEFAULT_MAX_ATTEMPTS
    from yolotui.errors import UserError

    if max_restarts is not None and max_attempts is not None:
        raise UserError("give --max-restarts or --max-attempts, not both")
    if max_restarts is not None:
        if max_restarts < 0:
            raise UserError(f"--max-restarts {max_restarts}: must be 0 or more")
        return max_restarts + 1
    if max_attempts is not None and max_attempts < 1:
        raise UserError(f"--max-attempts {max_attempts}: must be at least 1")
    return DEFAULT_MAX_ATTEMPTS if max_attempts is None else max_attempts


def run(args: argparse.Namespace) -> int:
    """Validate, create the run folder, launch the trainer detached, print the folder."""
    from yolotui.commands._distributed import given_layout
    from yolotui.commands._launch import after_launch, start_training
    from yolotui.commands._runflags import run_extra
    from yolotui.errors import UserError

    given, dist_flags, extra_run = given_options(args), given_layout(args), run_extra(args)
    if args.resume is not False:
        from yolotui.commands.resume import resume_run

        extra = sorted(k for k in given if k not in RESUME_CHANGEABLE)
        if extra:
            flags = ", ".join("--" + k.replace("_", "-") for k in extra)
            raise UserError(f"{flags} cannot be given with --resume: a resumed run keeps its options; only "
                            "--epochs, --batch-size, --device and --workers may change")
        target = None if args.resume is True else str(args.resume)
        return resume_run(target, **{k: given.get(k) for k in RESUME_CHANGEABLE}, attach=args.attach,
                          dist_flags=dist_flags, run_extra=extra_run)
    max_attempts = restart_limit(args.max_restarts, args.max_attempts)
    if args.restart_backoff is not None and args.restart_backoff < 0:
        raise UserError(f"--restart-backoff {args.restart_backoff:g}: must be 0 or more seconds")
    run_dir, opt, _hyp, warnings = prepare_run(given)
    for warning in warnings:
        print(f"warning: {warning}")
    try:
        start_training(run_dir, opt, max_attempts=max_attempts, dist_flags=dist_flags,
                       backoff_s=args.restart_backoff, run_extra=extra_run)
    except UserError:
        if not opt["exist_ok"]:
            import shutil

            shutil.rmtree(run_dir, ignore_errors=True)  # nothing ran in it: leave no half-made run behind
        raise
    return after_launch(run_dir, args.attach)
