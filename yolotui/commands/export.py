"""`yolotui export`: write the deployable (converted) model and, with --format onnx, an ONNX file.

A thin adapter over yolotui.engine.tools.export: parses flags, prints the engine's lines (or one JSON object),
and exits 1 when a self-check failed (the files are still written, for inspection).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from yolotui.commands._options import add_batch, add_imgsz
from yolotui.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags: --weights, --format, --img, --half, --opset, --dynamic, --output, --images, --val, --device, --json."""
    parser.add_argument("--weights", required=True,
                        help="yolotui checkpoint (runs/train/exp/weights/best.pt) or official YOLOv9 .pt")
    parser.add_argument("--format", dest="fmt", choices=("pt", "onnx"), default="pt",
                        help="pt: the converted inference checkpoint; onnx: that and an ONNX file (default pt)")
    add_imgsz(parser, "input size in pixels for the ONNX graph and the checks (default 640)", default=640)
    parser.add_argument("--half", action="store_true", help="fp16 weights (ONNX in fp16 needs a CUDA --device)")
    parser.add_argument("--opset", type=int, default=18,
                        help="ONNX opset (default 18; below 18 the TorchScript exporter is used)")
    parser.add_argument("--dynamic", action="store_true", help="ONNX with a dynamic batch dimension")
    parser.add_argument("--output", default=None,
                        help="path of the converted .pt (default: beside the weights, <name>-inference.pt); "
                             "the ONNX file takes the same name with .onnx")
    parser.add_argument("--images", nargs="+", default=[], metavar="IMAGE",
                        help="sample images for the output checks (default: the --val images, else generated)")
    parser.add_argument("--val", dest="val_data", default=None, metavar="DATA",
                        help="data yaml: also validate the training and the exported model and compare mAPs")
    add_batch(parser, "batch size for --val (default 8)", default=8)
    parser.add_argument("--device", default="cpu", help="cpu (default), 0 or cuda:0")
    parser.add_argument("--workers", type=int, default=0, help="data loader workers for --val")
    parser.add_argument("--json", action="store_true", help="print the report as JSON on stdout")


def _sample_images(args: argparse.Namespace) -> list[Path]:
    if args.images:
        missing = [p for p in args.images if not Path(p).is_file()]
        if missing:
            raise UserError(f"--images {missing[0]}: file not found")
        return [Path(p) for p in args.images]
    if args.val_data:
        from yolotui.datasets import list_images, load_data_yaml

        data = load_data_yaml(args.val_data)
        split = data.split("val")
        return list_images(split)[:4] if split else []
    return []


def run(args: argparse.Namespace) -> int:
    """Export --weights and print what was written and how the checks went."""
    weights = Path(args.weights)
    if not weights.is_file():
        raise UserError(f"--weights {weights}: file not found; give a checkpoint such as "
                        "runs/train/exp/weights/best.pt")
    if args.batch_size < 1:
        raise UserError(f"--batch-size {args.batch_size}: must be at least 1")
    from yolotui.engine.tools.export import ExportOptions, export

    options = ExportOptions(weights=weights, fmt=args.fmt, imgsz=args.imgsz, half=args.half, opset=args.opset,
                            dynamic=args.dynamic, device=args.device,
                            output=Path(args.output) if args.output else None, images=_sample_images(args),
                            val_data=Path(args.val_data) if args.val_data else None,
                            batch_size=args.batch_size, workers=args.workers)
    log = (lambda line: print(line, file=sys.stderr)) if args.json else print
    report = export(options, log=log)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    elif report.ok:
        print(f"export ok in {report.seconds:.1f} s")
    else:
        print("export: a check FAILED (see above); the files are kept for inspection", file=sys.stderr)
    return 0 if report.ok else 1
