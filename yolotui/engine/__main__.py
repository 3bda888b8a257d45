"""`python -m yolotui.engine train --run-dir RUN [...]`: the trainer process the supervisor starts.

It reads RUN/opt.yaml and RUN/hyp.yaml (written by `yolotui train`), resumes from RUN/weights/last.pt when
that exists, and writes events.jsonl, results.csv and checkpoints into RUN. Its stdout is train.log.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    """The trainer's own small command line (everything else comes from the run directory)."""
    parser = argparse.ArgumentParser(prog="python -m yolotui.engine")
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="train (or resume) the run in --run-dir")
    train.add_argument("--run-dir", required=True, help="run directory holding opt.yaml and hyp.yaml")
    train.add_argument("--epochs", type=int, default=None, help="total epochs (extends a finished run)")
    train.add_argument("--batch-size", "--batch", dest="batch_size", type=int, default=None)
    train.add_argument("--device", default=None)
    train.add_argument("--workers", type=int, default=None)
    train.add_argument("--lr-scale", type=float, default=None,
                       help="multiply the scheduled learning rate (kept on later resumes)")
    train.add_argument("--accumulate", type=int, default=None, help="batches per optimizer step")
    train.add_argument("--cache", choices=("ram", "none"), default=None,
                       help="cache images in RAM, or not (the host-oom remedy turns it off)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run the trainer; returns the exit code."""
    args = build_parser().parse_args(argv)
    from yolotui.engine.train.trainer import EngineOverrides, run_trainer

    overrides = EngineOverrides(epochs=args.epochs, batch_size=args.batch_size, device=args.device,
                                workers=args.workers, lr_scale=args.lr_scale, accumulate=args.accumulate,
                                cache=args.cache)
    return run_trainer(args.run_dir, overrides)


if __name__ == "__main__":
    sys.exit(main())
