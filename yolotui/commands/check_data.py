"""`yolotui check-data D [--json]`: check a data set's images and labels and print what is wrong.

D is a data.yaml, or a folder holding one. Prints one warning line per image left out and one summary
line per split; the exit status is 1 when a split has no usable image. Never imports torch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from yolotui.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of check-data."""
    parser.add_argument("data", help="data.yaml, or a folder that holds data.yaml")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    parser.add_argument("--min-items", type=int, default=0, help="leave out images with fewer boxes than this")
    parser.add_argument("--split", choices=("train", "val", "test"), action="append",
                        help="check only this split (repeatable; default: every split in the yaml)")
    parser.add_argument("--no-cache", action="store_true", help="ignore and do not write the label cache")


def _yaml_path(value: str) -> Path:
    path = Path(value).expanduser()
    if path.is_dir():
        for name in ("data.yaml", "data.yml"):
            if (path / name).is_file():
                return path / name
        raise UserError(f"{path}: no data.yaml in this folder; pass the data set's yaml file")
    return path


def run(args: argparse.Namespace) -> int:
    """Check every split; print warnings and summaries (or JSON); 1 when a split has no usable image."""
    from yolotui.datasets import check_labels, list_images, load_data_yaml

    if args.min_items < 0:
        raise UserError(f"--min-items must be 0 or more, got {args.min_items}")
    config = load_data_yaml(_yaml_path(args.data))
    splits = args.split or [s for s in ("train", "val", "test") if config.split(s)]
    result = {"yaml": config.yaml_path, "root": config.root, "nc": config.nc, "names": config.names, "splits": {}}
    status = 0
    for split in splits:
        sources = config.split(split)
        if not sources:
            raise UserError(f"{config.yaml_path}: '{split}' is not set in this data set")
        images = list_images(sources)
        report = check_labels(images, config.nc, cache=not args.no_cache, min_items=args.min_items)
        result["splits"][split] = report.to_dict()
        if not report.usable:
            status = 1
        if not args.json:
            for line in report.warnings:
                print(f"{split}: {line}")
            print(f"{split}: {report.summary}")
            if not images:
                print(f"{split}: no images found in {', '.join(sources)}", file=sys.stderr)
            elif not report.usable:
                print(f"{split}: no usable image; fix the warnings above", file=sys.stderr)
    if args.json:
        print(json.dumps(result, indent=2))
    return status
