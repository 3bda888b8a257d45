"""`yolotui val`: validate a checkpoint on a data set; P, R, mAP50, mAP50-95 overall and per class.

The checkpoint is yolotui's own or an official YOLOv9 .pt (read without running code from it, see
yolotui.backends.official.weights).

Prints a table (or, with --json, one JSON object on stdout). With --save-json the COCO-format
predictions.json and ground-truth.json are written into a run folder (runs/val/exp, numbered like the
official val.py) and their paths printed, ready for pycocotools.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from yolotui.errors import UserError

SPLITS = ("val", "test", "train")
_MAX_WARNINGS = 5


def _as_single_class(labels):
    labels = labels.copy()
    labels[:, 0] = 0
    return labels


DEFAULT_IMGSZ = 640


def trained_imgsz(info: dict) -> int | None:
    """The image size a checkpoint was trained at (its opt's imgsz / img_size), None when it does not say."""
    opt = info.get("opt") or {}
    for key in ("imgsz", "img_size"):
        value = opt.get(key)
        if isinstance(value, (list, tuple)) and value:
            value = value[0]
        if isinstance(value, int) and not isinstance(value, bool) and value >= 32:
            return value
    return None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags named as in the official val_dual.py."""
    parser.add_argument("--weights", required=True,
                        help="yolotui checkpoint (e.g. runs/train/exp/weights/best.pt) or official YOLOv9 .pt")
    parser.add_argument("--data", required=True, help="data set yaml (train/val/test, names)")
    from yolotui.commands._options import add_batch, add_imgsz

    add_imgsz(parser, default=None, help="inference size in pixels (default: the size the checkpoint was trained at, "
              f"else {DEFAULT_IMGSZ}; rounded up to a multiple of the model stride)")
    add_batch(parser, default=32, help="batch size (default 32)")
    parser.add_argument("--device", default="", help="cuda device, e.g. 0 or cuda:0, or cpu (default: GPU 0 if any)")
    parser.add_argument("--conf", "--conf-thres", dest="conf", type=float, default=0.001,
                        help="confidence threshold (default 0.001)")
    parser.add_argument("--iou", "--iou-thres", dest="iou", type=float, default=0.7,
                        help="NMS IoU threshold (default 0.7)")
    parser.add_argument("--max-det", type=int, default=300, help="maximum detections per image")
    parser.add_argument("--task", choices=SPLITS, default="val", help="which split of the data yaml to use")
    parser.add_argument("--workers", type=int, default=2, help="data loader workers")
    parser.add_argument("--single-cls", action="store_true",
                        help="treat every label as class 0 (for a model trained with --single-cls)")
    parser.add_argument("--single-label", action="store_true",
                        help="keep only each box's best class in NMS (the official validator keeps every class "
                             "above --conf)")
    parser.add_argument("--coco-metrics", action="store_true",
                        help="score as pycocotools does instead of as the official val.py (slightly different "
                             "matching and AP integration)")
    parser.add_argument("--save-json", action="store_true",
                        help="write COCO predictions.json and ground-truth.json into the run folder")
    parser.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    parser.add_argument("--project", default="runs/val", help="parent folder of the run folder")
    parser.add_argument("--name", default="exp", help="run folder name (numbered when taken: exp2, exp3 ...)")
    parser.add_argument("--exist-ok", action="store_true", help="reuse project/name instead of numbering")


def _check_numbers(args: argparse.Namespace) -> None:
    if args.batch_size < 1:
        raise UserError(f"--batch-size {args.batch_size}: must be at least 1")
    if args.imgsz is not None and args.imgsz < 32:
        raise UserError(f"--imgsz {args.imgsz}: must be at least 32")
    if not 0.0 <= args.conf <= 1.0:
        raise UserError(f"--conf {args.conf}: must be between 0 and 1")
    if not 0.0 <= args.iou <= 1.0:
        raise UserError(f"--iou {args.iou}: must be between 0 and 1")
    if args.max_det < 1:
        raise UserError(f"--max-det {args.max_det}: must be at least 1")
    if args.workers < 0:
        raise UserError(f"--workers {args.workers}: cannot be negative")


def select_device(device: str):
    """'' (GPU 0 if any, else CPU), 'cpu', '0' or 'cuda:0' -> torch.device; UserError for a missing GPU."""
    import torch

    text = (device or "").strip().lower()
    if text == "cpu" or (text == "" and not torch.cuda.is_available()):
        return torch.device("cpu")
    index_text = text.replace("cuda:", "").replace("cuda", "") or "0"
    if "," in index_text:
        index_text = index_text.split(",")[0]  # validation runs on one device: the first listed
    if not index_text.strip().isdigit():
        raise UserError(f"--device {device}: not a device; use cpu, 0 or cuda:0")
    index = int(index_text)
    if not torch.cuda.is_available():
        raise UserError(f"--device {device}: no CUDA device is available here; use --device cpu")
    if index >= torch.cuda.device_count():
        raise UserError(f"--device {device}: cuda:{index} does not exist, this machine has "
                        f"{torch.cuda.device_count()} GPU(s)")
    return torch.device(f"cuda:{index}")


def _run_folder(args: argparse.Namespace) -> Path:
    from yolotui.runs.store import check_writable, next_free_path, validate_name

    validate_name(args.name)
    project = Path(args.project)
    check_writable(project)
    folder = project / args.name if args.exist_ok else next_free_path(project, args.name)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create run folder {folder}: {exc.strerror}; choose another --project") from None
    return folder


def format_table(result) -> str:
    """The results as the official validation table: Class, Images, Instances, P, R, mAP50, mAP50-95."""
    header = ("%22s" + "%11s" * 6) % ("Class", "Images", "Instances", "P", "R", "mAP50", "mAP50-95")
    row = "%22s" + "%11i" * 2 + "%11.3g" * 4
    lines = [header, row % ("all", result.images, result.instances, result.precision, result.recall,
                            result.map50, result.map)]
    for item in result.per_class:
        lines.append(row % (item["name"][:22], item["images"], item["instances"], item["P"], item["R"],
                            item["mAP50"], item["mAP50-95"]))
    return "\n".join(lines)


def _progress_printer(enabled: bool):
    if not enabled:
        return None

    def show(done: int, total: int) -> None:
        end = "\n" if done == total else ""
        print(f"\rvalidating: batch {done}/{total}", end=end, file=sys.stderr, flush=True)

    return show


def run(args: argparse.Namespace) -> int:
    """Validate --weights on --data and print the results."""
    _check_numbers(args)
    weights = Path(args.weights)
    if not weights.is_file():
        raise UserError(f"--weights {weights}: file not found; give a checkpoint such as "
                        "runs/train/exp/weights/best.pt")
    from yolotui.datasets import check_labels, list_images, load_data_yaml

    data = load_data_yaml(args.data)
    if not data.split(args.task):
        raise UserError(f"{data.yaml_path}: no '{args.task}' split; add a '{args.task}:' entry or choose --task")

    import torch

    from yolotui.engine.data import YoloDataset, build_loader
    from yolotui.engine.evaluate.validate import validate
    from yolotui.engine.tools.weights import load_model_for_eval

    device = select_device(args.device)
    model, info = load_model_for_eval(weights, device, fuse=True)  # fused, as the official val.py
    nc = 1 if args.single_cls else data.nc
    names = (["item"] if len(data.names) != 1 else list(data.names)) if args.single_cls else list(data.names)
    if info["nc"] != nc:
        hint = " (or add --single-cls)" if info["nc"] == 1 and not args.single_cls else ""
        raise UserError(f"--weights {weights} predicts {info['nc']} classes but {data.yaml_path} has "
                        f"nc={nc}; validate on the data set the model was trained for{hint}")
    stride = int(max(float(s) for s in getattr(model, "stride", torch.tensor([32.0])))) or 32
    asked = args.imgsz if args.imgsz is not None else (trained_imgsz(info) or DEFAULT_IMGSZ)
    imgsz = asked
    if imgsz % stride:
        imgsz = (imgsz // stride + 1) * stride
        print(f"yolotui: warning: --img {asked} must be a multiple of the model stride {stride}, "
              f"updated to {imgsz}", file=sys.stderr)
    report = check_labels(list_images(data.split(args.task)), data.nc)
    for warning in report.warnings[:_MAX_WARNINGS]:
        print(f"yolotui: warning: {warning}", file=sys.stderr)
    if len(report.warnings) > _MAX_WARNINGS:
        print(f"yolotui: warning: ... and {len(report.warnings) - _MAX_WARNINGS} more; run yolotui check-data",
              file=sys.stderr)
    report.require_usable(f"{data.yaml_path} '{args.task}'")
    pairs = report.usable
    if args.single_cls:
        pairs = [(path, _as_single_class(labels)) for path, labels in pairs]
    # rectangular batches with half a stride of margin, as the official val.py / val_dual.py
    dataset = YoloDataset(pairs, imgsz=imgsz, augment=False, stride=stride, rect=True,
                          batch_size=args.batch_size, pad=0.5, shapes=report.shapes)
    loader = build_loader(dataset, batch_size=args.batch_size, workers=args.workers, shuffle=False)
    folder = _run_folder(args) if args.save_json else None
    result = validate(model, loader, device, nc, names, save_json_dir=folder, conf=args.conf, iou=args.iou,
                      max_det=args.max_det, progress=_progress_printer(not args.json and sys.stderr.isatty()),
                      single_label=args.single_label, coco_metrics=args.coco_metrics)

    if args.json:
        payload = {"weights": str(weights), "data": str(data.yaml_path), "task": args.task, "imgsz": imgsz,
                   "device": str(device), "epoch": info.get("epoch"), "run_dir": str(folder) if folder else None,
                   **result.to_dict()}
        print(json.dumps(payload, indent=2))
        return 0
    from yolotui import formatting

    print(f"{weights} ({info['weights']} weights, {formatting.epochs_done(info.get('epoch'), info.get('epochs'))}) "
          f"on {data.yaml_path} "
          f"'{args.task}': {len(dataset)} images at {imgsz} px, {device}")
    print(format_table(result))
    per_image_ms = 1000 * result.seconds / max(result.images, 1)
    print(f"{result.seconds:.1f} s ({per_image_ms:.1f} ms per image, including NMS); "
          f"fitness {result.fitness:.4f}")
    if folder is not None:
        print(f"predictions: {result.predictions_json}")
        print(f"ground truth: {result.ground_truth_json}")
    return 0
