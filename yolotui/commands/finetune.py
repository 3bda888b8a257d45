"""`yolotui finetune --from RUN|CKPT --data D [--freeze backbone|N] [--epochs 30] [--lr-scale 0.1] [--name ...]`.

A new run initialised from the source's EMA weights (a run's best.pt, else its last.pt, or the checkpoint
given). Tensors are transferred by name and shape: with a different class count only the classification
outputs are re-initialised (the trainer reports how many tensors it transferred). The source run's
hyperparameters are kept with lr0 multiplied by --lr-scale; mosaic is closed over the last third of the
epochs unless --close-mosaic says otherwise.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from yolotui.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Source, new data and the fine-tuning knobs."""
    parser.add_argument("--from", dest="source", required=True, metavar="RUN|CKPT",
                        help="run folder or name (its best.pt, else last.pt), a yolotui checkpoint or an "
                        "official YOLOv9 .pt")
    parser.add_argument("--data", required=True, help="data.yaml of the new data set")
    parser.add_argument("--freeze", nargs="+", default=None, help="'backbone', N first layers, or layer indices")
    parser.add_argument("--epochs", type=int, default=30, help="epochs (default 30)")
    parser.add_argument("--lr-scale", type=float, default=0.1, help="multiply lr0 by this (default 0.1)")
    parser.add_argument("--name", default=None, help="run name (default: <source>-ft)")
    parser.add_argument("--project", default=None, help="parent folder (default: the source run's)")
    parser.add_argument("--batch-size", "--batch", dest="batch_size", type=int, default=None)
    parser.add_argument("--imgsz", "--img", dest="imgsz", type=int, default=None)
    parser.add_argument("--device", default=None)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--close-mosaic", type=int, default=None, help="default: a third of --epochs")
    parser.add_argument("--hyp", default=None, help="hyperparameters (default: the source run's hyp.yaml)")
    parser.add_argument("--attach", action="store_true", help="follow progress here; Ctrl-C detaches")
    from yolotui.commands._distributed import add_distributed_flags

    add_distributed_flags(parser)
    from yolotui.commands._runflags import add_run_flags

    add_run_flags(parser)


def source_checkpoint(value: str) -> tuple[Path, Path | None]:
    """(checkpoint file, its run folder or None) for a --from value."""
    path = Path(value).expanduser()
    if path.is_file():
        run_dir = path.parent.parent if path.parent.name == "weights" else None
        return path.resolve(), run_dir.resolve() if run_dir and (run_dir / "opt.yaml").exists() else None
    if path.is_dir() and (path / "opt.yaml").exists():
        run_dir = path.resolve()
    else:
        from yolotui.runs.resolve import resolve_run

        run_dir = Path(resolve_run(value))
    for name in ("best.pt", "last.pt"):
        candidate = run_dir / "weights" / name
        if candidate.is_file():
            return candidate, run_dir
    raise UserError(f"--from {value}: {run_dir} has no weights/best.pt or last.pt yet")


def run(args: argparse.Namespace) -> int:
    """Build the new run's options from the source run, then launch it like `yolotui train`."""
    from yolotui.commands._launch import after_launch, start_training
    from yolotui.commands.train import prepare_run
    from yolotui.config import load_hyp, load_yaml, save_yaml
    from yolotui.runs import layout

    if args.epochs < 1:
        raise UserError(f"--epochs {args.epochs}: must be at least 1")
    if args.lr_scale <= 0:
        raise UserError(f"--lr-scale {args.lr_scale}: must be above 0")
    from yolotui.commands._runflags import run_extra

    extra_run = run_extra(args)  # a bad --log-config is refused before any folder is made
    ckpt, source_run = source_checkpoint(args.source)
    source_opt = load_yaml(source_run / layout.OPT_YAML, "opt.yaml") if source_run else {}
    given = {
        "weights": str(ckpt),
        "data": args.data,
        "epochs": args.epochs,
        "name": args.name or f"{(source_run.name if source_run else ckpt.stem)}-ft",
        "project": args.project or (str(source_run.parent) if source_run else "runs/train"),
        "close_mosaic": args.close_mosaic if args.close_mosaic is not None else args.epochs // 3,
        "freeze": args.freeze if args.freeze is not None else [0],
    }
    for key in ("batch_size", "imgsz", "device", "workers", "optimizer", "seed", "cos_lr", "flat_cos_lr",
                "fixed_lr", "save_period_min"):
        value = getattr(args, key, None)
        if value is None:
            value = source_opt.get(key)
        if value is not None:
            given[key] = value
    if args.hyp is not None:
        given["hyp"] = args.hyp
    elif source_run and (source_run / layout.HYP_YAML).exists():
        given["hyp"] = str(source_run / layout.HYP_YAML)
    run_dir, opt, hyp, warnings = prepare_run(given)
    hyp = {**load_hyp(run_dir / layout.HYP_YAML)}
    hyp["lr0"] = float(hyp["lr0"]) * float(args.lr_scale)
    save_yaml(run_dir / layout.HYP_YAML, hyp)
    for warning in warnings:
        print(f"warning: {warning}")
    print(f"fine-tuning from {ckpt} (lr0 {hyp['lr0']:.3g}, freeze {opt['freeze']}, {opt['epochs']} epochs)")
    from yolotui.commands._distributed import given_layout

    start_training(run_dir, opt, dist_flags=given_layout(args), run_extra=extra_run)
    return after_launch(run_dir, args.attach)
