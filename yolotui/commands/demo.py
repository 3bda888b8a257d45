"""`yolotui demo`: generate the demo data set if absent, start a short detached training run, and follow it.

The run trains a small model (gelan-t by default, 160 px, 50 epochs; the recipe `yolotui train` picks for so
few optimizer steps, hyp.short-run.yaml) on
coloured shapes generated locally, so it needs no download and finishes in minutes on a laptop CPU. It opens
the dashboard, or (with --no-tui) follows in plain text; --detach or --json return at once. Quitting either
never stops the run. Run again while a demo trains, it opens that demo (and says so) instead of a second one.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

DEMO_MODEL = "gelan-t"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Demo knobs (defaults give a few minutes of CPU training)."""
    from yolotui.commands._options import add_batch, add_imgsz, add_json

    parser.add_argument("--data-dir", default=None, help="where the demo data set lives (default: state dir)")
    parser.add_argument("--cfg", default=DEMO_MODEL, help=f"model (default {DEMO_MODEL})")
    parser.add_argument("--epochs", type=int, default=50, help="epochs (default 50: mAP50 about 0.5 by epoch 30)")
    add_batch(parser, default=16, help="total batch size (default 16)")
    add_imgsz(parser, default=160, help="image size (default 160)")
    parser.add_argument("--hyp", default=None, help="hyperparameters (default: as `yolotui train` picks: the "
                        "short-run recipe for so few optimizer steps)")
    parser.add_argument("--device", default="", help="default: first GPU, else cpu")
    parser.add_argument("--workers", type=int, default=2, help="data loader workers (default 2)")
    parser.add_argument("--project", default="runs/train", help="parent folder of the run (default runs/train)")
    parser.add_argument("--name", default="demo", help="run folder name (default demo; numbered when taken)")
    parser.add_argument("--no-tui", action="store_true", help="follow in plain text instead of the dashboard")
    parser.add_argument("--detach", action="store_true", help="start the run and return at once")
    add_json(parser)


def demo_data(folder: Path, out=sys.stdout) -> Path:
    """The demo data.yaml in `folder`, generated on first use."""
    from yolotui.datasets import make_demo_dataset

    yaml_path = folder / "data.yaml"
    if yaml_path.is_file():
        return yaml_path
    print(f"generating the demo data set in {folder} ...", file=out)
    return Path(make_demo_dataset(folder))


def run(args: argparse.Namespace) -> int:
    """Data, launch, then dashboard or plain-text follow."""
    from yolotui.commands._options import report_started
    from yolotui.jobs.demo import OPENED, start_demo
    from yolotui.runs import index

    out = sys.stderr if args.json else sys.stdout
    folder = Path(args.data_dir).expanduser() if args.data_dir else index.home_dir() / "demo-data"
    data_yaml = demo_data(folder, out)
    given = {"data": str(data_yaml), "cfg": args.cfg, "epochs": args.epochs, "batch_size": args.batch_size,
             "imgsz": args.imgsz, "device": args.device, "workers": args.workers, "project": args.project,
             "name": args.name, "hyp": args.hyp, "patience": 0,
             "save_period_min": 2.0}
    result = start_demo(given)
    report_started(result, args.json)
    run_dir = result.run_dir
    if result.verb != OPENED:
        print(f"started demo run {run_dir.name}: {run_dir}", file=out)
    if args.detach or args.json:
        print(f"follow it with: yolotui attach {shlex.quote(str(run_dir))}", file=out)
        return 0
    if not args.no_tui:
        from yolotui.tui.app import run_app

        return int(run_app(run_dir) or 0)
    from yolotui.commands._progress import follow

    follow(run_dir)
    return 0
