"""`yolotui finetune --from RUN|CKPT --data D [--freeze backbone|N] [--epochs 30] [--lr-scale 0.1] [--name ...]`.

A new run initialised from the source's EMA weights (a run's best.pt, else its last.pt, or the checkpoint
given). Tensors are transferred by name and shape: with a different class count only the classification
outputs are re-initialised (the trainer reports how many tensors it transferred). The source run's
hyperparameters are kept with lr0 multiplied by --lr-scale; mosaic is closed over the last third of the
epochs unless --close-mosaic says otherwise. The work itself is yolotui.jobs.finetune.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Source, new data and the fine-tuning knobs."""
    from yolotui.commands._distributed import add_distributed_flags
    from yolotui.commands._options import add_batch, add_imgsz, add_json

    parser.add_argument("--from", dest="source", required=True, metavar="RUN|CKPT",
                        help="run folder or name (its best.pt, else last.pt), a yolotui checkpoint or an "
                        "official YOLOv9 .pt")
    parser.add_argument("--data", required=True, help="data.yaml of the new data set")
    parser.add_argument("--freeze", nargs="+", default=None, help="'backbone', N first layers, or layer indices")
    parser.add_argument("--epochs", type=int, default=30, help="epochs (default 30)")
    parser.add_argument("--lr-scale", type=float, default=0.1, help="multiply lr0 by this (default 0.1)")
    parser.add_argument("--name", default=None, help="run name (default: <source>-ft)")
    parser.add_argument("--project", default=None, help="parent folder (default: the source run's)")
    add_batch(parser, help="total batch size (default: the source run's)")
    add_imgsz(parser, help="image size (default: the source run's)")
    parser.add_argument("--device", default=None, help="device: 0, 0,1 or cpu (default: the source run's)")
    parser.add_argument("--workers", type=int, default=None, help="data loader workers (default: the source run's)")
    parser.add_argument("--close-mosaic", type=int, default=None, help="default: a third of --epochs")
    parser.add_argument("--hyp", default=None, help="hyperparameters (default: the source run's hyp.yaml)")
    parser.add_argument("--attach", action="store_true", help="follow progress here; Ctrl-C detaches")
    from yolotui.backends import backend_names

    parser.add_argument("--backend", choices=backend_names(), default="yolotui",
                        help="yolotui: the built-in engine (default; official and ultralytics YOLOv9 .pt files too); "
                             "official: the official train_dual.py --weights SOURCE --freeze N with lr0 scaled; "
                             "ultralytics: ultralytics' trainer, model=SOURCE freeze=N with lr0 scaled")
    from yolotui.commands.train import add_backend_flags

    add_backend_flags(parser, "finetune")
    add_json(parser)
    add_distributed_flags(parser)
    from yolotui.commands._runflags import add_run_flags

    add_run_flags(parser)
    from yolotui.commands._trackerflags import add_tracker_flags

    add_tracker_flags(parser)
    from yolotui.commands._slurm import add_slurm_flags

    add_slurm_flags(parser)


def run(args: argparse.Namespace) -> int:
    """Build the new run's options from the source run, then launch it like `yolotui train`."""
    from yolotui.backends import get_backend
    from yolotui.commands._distributed import given_layout
    from yolotui.commands._launch import after_launch
    from yolotui.commands._runflags import extras_from
    from yolotui.commands._slurm import slurm_options
    from yolotui.jobs.finetune import INHERITED, FinetuneRequest, finetune

    backend = get_backend(getattr(args, "backend", None))
    if not backend.takes_training_options:  # another project's trainer: its backend plans the fine-tune
        from yolotui.jobs.foreign import start_planned

        return after_launch(start_planned(backend.name, backend.finetune_plan(args)), args.attach, args.json)
    options = {key: getattr(args, key, None) for key in (*INHERITED, "hyp")}
    result = finetune(FinetuneRequest(args.source, args.data, epochs=args.epochs, lr_scale=args.lr_scale,
                                      freeze=args.freeze, name=args.name, project=args.project,
                                      close_mosaic=args.close_mosaic,
                                      options={k: v for k, v in options.items() if v is not None},
                                      layout=given_layout(args), extras=extras_from(args),
                                      slurm=slurm_options(args)))
    return after_launch(result, args.attach, args.json)
