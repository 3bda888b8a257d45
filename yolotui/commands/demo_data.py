"""`yolotui demo-data [DIR]`: write the demo data set of coloured shapes (no download, no torch)."""

from __future__ import annotations

import argparse
import time

from yolotui.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of demo-data."""
    parser.add_argument("dir", nargs="?", default="demo-data", help="output folder (default: demo-data)")
    parser.add_argument("--train", type=int, default=128, help="training images (default 128)")
    parser.add_argument("--val", type=int, default=32, help="validation images (default 32)")
    from yolotui.commands._options import add_imgsz

    add_imgsz(parser, dest="img", default=256, help="image side in pixels (default 256)")
    parser.add_argument("--seed", type=int, default=0, help="random seed; the same seed gives the same files")


def run(args: argparse.Namespace) -> int:
    """Generate the data set and print where its data.yaml is."""
    from yolotui.datasets.demo import make_demo_dataset

    if args.train < 1 or args.val < 1:
        raise UserError(f"--train and --val must be 1 or more, got {args.train} and {args.val}")
    if args.img < 32:
        raise UserError(f"--imgsz must be at least 32 pixels, got {args.img}")
    started = time.monotonic()
    yaml_path = make_demo_dataset(args.dir, n_train=args.train, n_val=args.val, img=args.img, seed=args.seed)
    print(f"demo data: {args.train} train + {args.val} val images at {args.img} px in "
          f"{time.monotonic() - started:.1f}s -> {yaml_path}")
    return 0
