"""`yolotui model-info`: layers, parameters and GFLOPs of a model config, trained, fused and converted."""

from __future__ import annotations

import argparse
import json

from yolotui.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags: --cfg NAME|PATH, --nc, --imgsz (also --img), --json."""
    parser.add_argument("--cfg", required=True, metavar="NAME|PATH",
                        help="model config: a shipped name (yolov9-s, gelan-c, ...) or a model YAML path")
    parser.add_argument("--nc", type=int, default=None, help="number of classes (default: the config's nc)")
    from yolotui.commands._options import add_imgsz

    add_imgsz(parser, dest="img", default=640, help="square input size for GFLOPs (default 640)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    """Build the model without initialising weights and print its size three ways."""
    if args.nc is not None and args.nc < 1:
        raise UserError(f"--nc must be a positive number of classes, got {args.nc}")
    if args.img < 32:
        raise UserError(f"--imgsz must be at least 32 pixels, got {args.img}")
    from yolotui.configs import resolve_model_cfg
    from yolotui.engine.model.summary import summarize

    path = resolve_model_cfg(args.cfg)
    summary = summarize(path, nc=args.nc, imgsz=args.img)
    nc = summary.pop("nc")
    if args.json:
        print(json.dumps({"cfg": str(path), "nc": nc, "img": args.img, **summary}, indent=2))
        return 0
    print(f"{path.stem}  ({path})  nc={nc}  {args.img}x{args.img}")
    print(f"{'':<28}{'layers':>8}{'parameters':>14}{'GFLOPs':>10}")
    rows = [("training model", "train"), ("fused (Conv+BN, RepConvN)", "fused"),
            ("inference (converted)", "inference")]
    for label, key in rows:
        info = summary[key]
        print(f"{label:<28}{info['layers']:>8}{info['params']:>14,}{info['gflops']:>10.2f}")
    if summary["inference"]["params"] != summary["fused"]["params"]:
        print("inference drops the auxiliary (PGI) branch: only the main branch is needed to predict")
    return 0
