"""`yolotui ls --all-hosts`: the runs of this machine and of every configured host in one table (a HOST
column), the hosts queried concurrently, each within its timeout; a host that does not answer is named
("gpu2: unreachable since 14:02") and never holds up the others."""

from __future__ import annotations

import json
import sys


def run_all_hosts(as_json: bool) -> int:
    """Print every host's runs (table or JSON list with a `host` key); unreachable hosts on stderr."""
    from yolotui.commands._runfmt import emit, epoch_text, table, when
    from yolotui.fleet.hosts import load_hosts
    from yolotui.fleet.reach import remember, unreachable_since
    from yolotui.fleet.remote_runs import read_all

    readings = read_all(load_hosts(strict=True))
    down = remember({r.host: not r.unreachable for r in readings if r.host != "local"})
    runs = [{"host": r.host, **run} for r in readings for run in r.runs]
    problems = []
    for reading in readings:
        if reading.unreachable:
            problems.append(f"{reading.host}: {unreachable_since(down.get(reading.host))} ({reading.error})")
        elif reading.error:
            problems.append(f"{reading.host}: {reading.error}")
    if as_json:
        emit(json.dumps(runs, indent=2))
    elif runs:
        rows = [(r["host"], str(r["name"]), str(r["state"]), epoch_text(r.get("epoch"), r.get("epochs")),
                 f"{r['best_map']:.4f}" if isinstance(r.get("best_map"), (int, float)) else "-",
                 str(r.get("device") or "-"), when(_number(r.get("started")))) for r in runs]
        emit(table(("HOST", "NAME", "STATE", "EPOCH", "mAP50-95", "DEVICE", "STARTED"), rows))
    else:
        print("no runs on any host")
    for line in problems:
        print(f"yolotui: warning: {line}", file=sys.stderr)
    return 0


def _number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
