"""`yolotui compare RUN RUN... [--json]`: best/final metrics side by side and the option keys that differ."""

from __future__ import annotations

import argparse
import json

_MISSING = "-"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Positional runs; --json."""
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run names (see `yolotui ls`) or run folders")
    parser.add_argument("--json", action="store_true", help="print one JSON object (with --curves, the curves too)")
    parser.add_argument("--curves", action="store_true", help="with --json: include each run's per-epoch curves")


def _num(value, digits: int = 4) -> str:
    return _MISSING if value is None else f"{value:.{digits}f}"


def _value(value) -> str:
    text = _MISSING if value is None else str(value)
    return text if len(text) <= 28 else text[:27] + "…"


def format_table(comparison) -> list[str]:
    """The metrics table: one row per run, best epoch (by fitness) and final epoch."""
    header = f"{'run':<24}{'state':<12}{'epochs':>9}  {'best@':>5}{'mAP50':>8}{'mAP50-95':>10}  " \
             f"{'final mAP50':>11}{'mAP50-95':>10}"
    lines = [header]
    for run in comparison.runs:
        best, final = run.best or {}, run.final or {}
        planned = run.epochs_planned if run.epochs_planned is not None else "?"
        best_epoch = str(best["epoch"]) if best else _MISSING
        lines.append(f"{run.name[:23]:<24}{run.state[:11]:<12}{f'{run.epochs_done}/{planned}':>9}  "
                     f"{best_epoch:>5}{_num(best.get('mAP50')):>8}{_num(best.get('mAP50-95')):>10}  "
                     f"{_num(final.get('mAP50')):>11}{_num(final.get('mAP50-95')):>10}")
    return lines


def format_diff(comparison) -> list[str]:
    """The differing opt.yaml/hyp.yaml keys, one line each, a column per run."""
    if not comparison.diff:
        return ["opt.yaml and hyp.yaml: no differences"]
    width = max(len(f"{d.file}:{d.key}") for d in comparison.diff) + 2
    names = "".join(f"{run.name[:27]:<29}" for run in comparison.runs)
    lines = [f"{'differs':<{width}}{names}".rstrip()]
    for d in comparison.diff:
        cells = "".join(f"{_value(v):<29}" for v in d.values)
        lines.append(f"{f'{d.file}:{d.key}':<{width}}{cells}".rstrip())
    return lines


def run(args: argparse.Namespace) -> int:
    """Resolve the runs, compare, print."""
    import sys

    from yolotui.jobs.compare import resolve_and_compare

    comparison = resolve_and_compare(args.runs)
    if args.json:
        print(json.dumps(comparison.to_dict(with_curves=args.curves), indent=2, default=str))
        return 0
    for warning in comparison.warnings:
        print(f"yolotui: warning: {warning}", file=sys.stderr)
    print("\n".join(format_table(comparison)))
    print()
    print("\n".join(format_diff(comparison)))
    return 0
