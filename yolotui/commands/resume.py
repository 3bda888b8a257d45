"""`yolotui resume [RUN|PATH] [--epochs N] [--batch-size B] [--device D] [--workers W]`.

Continues a run from weights/last.pt at the next batch of the interrupted epoch, with the run's saved options.
Only --epochs, --batch-size (accumulation re-derived, nominal batch 64 kept), --device and --workers may
change; any other training flag is an error. `--epochs N` above the planned total extends the run (also a
finished one): the LR schedule is re-planned as if N epochs had been planned from the start, and training
continues at the current epoch on that curve. With no RUN, the newest interrupted run is resumed.
`--interrupted` resumes every interrupted run of the user, each as it was (yolotui/runs/service.py): what
`yolotui service install` runs at boot.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from yolotui.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """RUN plus the four changeable options; the other training flags are accepted only to be refused."""
    from yolotui.commands.train import TRAIN_FLAGS

    parser.add_argument("run", nargs="?", default=None, metavar="RUN|PATH",
                        help="run folder or name, or its weights/last.pt (default: newest interrupted run)")
    parser.add_argument("--epochs", type=int, default=None, help="total epochs: above the plan extends the run")
    parser.add_argument("--batch-size", "--batch", dest="batch_size", type=int, default=None)
    parser.add_argument("--device", default=None)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--attach", action="store_true", help="follow progress here; Ctrl-C detaches")
    from yolotui.commands._runflags import add_run_flags

    add_run_flags(parser)
    parser.add_argument("--from", dest="from_ckpt", default=None, metavar="CKPT",
                        help="resume from this checkpoint of the run (best.pt, epochN.pt) when last.pt is damaged; "
                             "the damaged last.pt is kept as last.pt.damaged-<time>")
    parser.add_argument("--interrupted", action="store_true",
                        help="resume every interrupted run of yours (after a reboot or container restart)")
    changeable = {"--epochs", "--batch-size", "--batch", "--device", "--workers"}
    for flags, kwargs in TRAIN_FLAGS:
        if changeable.intersection(flags):
            continue
        options = {k: v for k, v in kwargs.items() if k in ("dest", "action", "nargs", "const", "type")}
        parser.add_argument(*flags, **options, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    from yolotui.commands._distributed import add_distributed_flags

    add_distributed_flags(parser)  # the process layout may change (a new rendezvous host, more CPU processes)


def run_dir_for(target: str | None) -> Path:
    """The run folder a RUN|PATH argument names; None picks the newest interrupted or stopped run."""
    if target is None:
        return newest_resumable()
    path = Path(target).expanduser()
    if path.is_file():
        if path.parent.name != "weights":
            raise UserError(f"{path}: resume continues a run from its weights/last.pt; to start a new run from "
                            "this checkpoint use `yolotui finetune --from` or `yolotui train --weights`")
        if path.name != "last.pt":
            raise UserError(f"{path}: resume continues from weights/last.pt; to start from {path.name} use "
                            "`yolotui finetune --from` or `yolotui train --weights`")
        return path.parent.parent.resolve()
    if path.is_dir() and (path / "opt.yaml").exists():
        return path.resolve()
    try:
        from yolotui.runs.resolve import resolve_run
    except ImportError:
        raise UserError(f"{target}: not a run folder (no opt.yaml)") from None
    return Path(resolve_run(target))


def newest_resumable() -> Path:
    """The most recently updated indexed run that ended unfinished and has a last.pt."""
    from yolotui.runs import index, layout
    from yolotui.runs.atomic import read_json
    from yolotui.runs.status import effective_state, read_status

    best: tuple[float, Path] | None = None
    for entry in index.entries():
        run_dir = Path(entry.path)
        last = run_dir / layout.WEIGHTS_DIR / layout.LAST_PT
        manifest = read_json(layout.manifest_path(last)) or {}
        if not last.exists() or manifest.get("epoch", 0) >= manifest.get("epochs", 1):
            continue
        if effective_state(run_dir) not in (layout.INTERRUPTED, layout.STOPPED, layout.FAILED):
            continue
        status = read_status(run_dir)
        stamp = (status.updated if status and status.updated else 0.0) or last.stat().st_mtime
        if best is None or stamp > best[0]:
            best = (stamp, run_dir)
    if best is None:
        raise UserError("no interrupted run to resume: name one (see `yolotui ls`)")
    return best[1]


def resume_run(target: str | None, epochs: int | None = None, batch_size: int | None = None,
               device: str | None = None, workers: int | None = None, attach: bool = False,
               dist_flags: dict[str, Any] | None = None, from_ckpt: str | None = None,
               run_extra: dict[str, Any] | None = None) -> int:
    """Check the run can resume (or extend), then relaunch its trainer with the changed options."""
    from yolotui.commands._launch import after_launch, start_training
    from yolotui.config import device_string, load_yaml, parse_device
    from yolotui.runs import layout, lock
    from yolotui.runs.atomic import read_json

    run_dir = run_dir_for(target)
    if lock.is_held(run_dir):
        raise UserError(f"run {run_dir} is still live: stop it first (yolotui stop {run_dir.name})")
    if from_ckpt:
        from yolotui.commands._restore import restore_last

        restore_last(run_dir, from_ckpt)
    last = run_dir / layout.WEIGHTS_DIR / layout.LAST_PT
    if not last.exists():
        raise UserError(f"{run_dir}: no weights/last.pt to resume from; start it again with yolotui train")
    manifest = read_json(layout.manifest_path(last))
    if not isinstance(manifest, dict):
        raise UserError(f"{last}: its manifest {last.name}.json is missing or unreadable; run yolotui doctor")
    done, planned = int(manifest.get("epoch", 0)), int(manifest.get("epochs", 0))
    if batch_size is not None and batch_size < 1:
        raise UserError(f"--batch-size {batch_size}: must be at least 1")
    if workers is not None and workers < 0:
        raise UserError(f"--workers {workers}: cannot be negative")
    if epochs is not None:
        if epochs < 1:
            raise UserError(f"--epochs {epochs}: must be at least 1")
        if epochs <= done and done >= planned:
            raise UserError(f"run {run_dir.name} has finished {done} epochs: give --epochs above {done} to extend it")
        if epochs < done:
            raise UserError(f"--epochs {epochs}: the run has already done {done} epochs; give at least {done + 1}")
    elif done >= planned:
        raise UserError(f"run {run_dir.name} finished all {planned} epochs: extend it with --epochs N (N > {done})")
    if device is not None:
        device = device_string(parse_device(device))
    opt: dict[str, Any] = load_yaml(run_dir / layout.OPT_YAML, "opt.yaml")
    overrides = {"epochs": epochs, "batch_size": batch_size, "device": device, "workers": workers}
    for key, value in overrides.items():
        if value is not None:
            opt[key] = value
    from yolotui.commands._launch import write_run_files
    from yolotui.config import load_hyp

    write_run_files(run_dir, opt, load_hyp(run_dir / layout.HYP_YAML))
    from yolotui.commands._distributed import saved_layout

    saved = saved_layout(run_dir)  # the layout of the last launch; flags given now replace its entries
    if device is not None:
        saved.pop("nproc_per_node", None)  # a new device list sets the process count anew
    start_training(run_dir, opt, overrides, dist_flags={**saved, **(dist_flags or {})}, run_extra=run_extra)
    verb = "extending" if epochs is not None and epochs > planned else "resumed"
    print(f"{verb} from epoch {done}, batch {manifest.get('step', 0)} of {epochs or planned} epochs")
    return after_launch(run_dir, attach, verb="resuming")


def run(args: argparse.Namespace) -> int:
    """Refuse unchangeable flags, then resume."""
    if args.interrupted:  # issue 7: after a reboot, each run continues with its own saved settings
        if args.run or any(v is not None for v in (args.epochs, args.batch_size, args.device, args.workers,
                                                    args.from_ckpt)):
            raise UserError("--interrupted resumes every interrupted run as it was: give no RUN and no options")
        from yolotui.commands.service import print_resume_interrupted

        return print_resume_interrupted()
    from yolotui.commands.train import RESUME_CHANGEABLE, given_options

    extra = sorted(k for k in given_options(args) if k not in RESUME_CHANGEABLE)
    if extra:
        flags = ", ".join("--" + k.replace("_", "-") for k in extra)
        raise UserError(f"{flags} cannot be changed on resume: a resumed run keeps its options; only --epochs, "
                        "--batch-size, --device and --workers may change (use `yolotui finetune` for a new run)")
    from yolotui.commands._distributed import given_layout
    from yolotui.commands._runflags import run_extra

    return resume_run(args.run, args.epochs, args.batch_size, args.device, args.workers, args.attach,
                      dist_flags=given_layout(args), from_ckpt=getattr(args, "from_ckpt", None),
                      run_extra=run_extra(args))
