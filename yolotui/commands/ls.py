"""`yolotui ls [--json]`: every indexed run, newest first: name, state, epoch, best mAP, checkpoint age ...

Kept light: reads the index and a few small files per run; imports nothing heavy.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `yolotui ls`."""
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    parser.add_argument("--all-hosts", action="store_true",
                        help="this machine's runs and every configured host's (yolotui hosts), with a HOST column")


def run(args: argparse.Namespace) -> int:
    """Print the runs table (or JSON)."""
    import json
    import sys

    from yolotui.commands._runfmt import age, emit, epoch_text, table, when
    from yolotui.runs.index import last_problem
    from yolotui.runs.summary import summarize_all

    if args.all_hosts:
        from yolotui.commands._fleet_ls import run_all_hosts

        return run_all_hosts(args.json)
    summaries = summarize_all()
    problem = last_problem()  # a damaged index is named (stderr), never taken for "no runs yet"
    if problem:
        print(f"yolotui: {'error' if not summaries else 'warning'}: {problem}", file=sys.stderr)
    if args.json:
        emit(json.dumps([s.to_dict() for s in summaries], indent=2))
        return 1 if problem and not summaries else 0
    if not summaries:
        if problem:
            return 1
        print("no runs yet: start one with `yolotui exec -- CMD` or `yolotui train`")
        return 0
    header = ("NAME", "STATE", "EPOCH", "mAP50-95", "CKPT", "DEVICE", "STARTED")
    with_slurm = any(s.slurm for s in summaries)  # a SLURM column only where some run is a SLURM job
    if with_slurm:
        from yolotui.runs.slurm_state import short_text

        header += ("SLURM",)
    rows = []
    for s in summaries:
        state = s.state if not s.failure_class else f"{s.state} ({s.failure_class})"
        epoch = epoch_text(s.epoch, s.epochs)
        if s.state == "queued" and s.message and not s.slurm:  # what it waits for, instead of an epoch
            from yolotui.placement.queue import short_note

            epoch = short_note(s.message)
        row = (s.name, state, epoch, f"{s.best_map:.4f}" if s.best_map is not None else "-",
               age(s.checkpoint_age), s.device or "-", when(s.started))
        if with_slurm:
            row += (short_text(s.slurm) if s.slurm else "-",)
        rows.append(row)
    emit(table(header, rows))
    return 0
