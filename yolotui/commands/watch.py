"""`yolotui watch RUN [--json]`: follow a run as lines until it ends (the remote side of the fleet's live view).

With `--json` each line is one JSON object: `{"type": "status", ...summary}` first and whenever it changes, the
run's newest events (from the tail of events.jsonl, never from its start: at most --tail of them), then each new
event as it is written (batch events at most two a second), `{"type": "heartbeat"}` every few quiet seconds, and
`{"type": "end", "state": ...}` when the run has ended. It also stops when its stdin (a pipe, as under ssh)
closes. `yolotui watch HOST:RUN` follows a run of a configured host the same way over ssh, reconnecting by
itself when the link drops (yolotui.fleet.stream).
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import stat
import sys
import time

TAIL_BYTES = 256 * 1024
HEARTBEAT_S = 5.0
STATUS_EVERY_S = 1.0
BATCH_GAP_S = 0.5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """RUN, --json, --tail."""
    parser.add_argument("run", metavar="RUN", help="run name or folder, or HOST:RUN for a configured host")
    parser.add_argument("--json", action="store_true", help="one JSON object a line (for scripts and the fleet)")
    parser.add_argument("--tail", type=int, default=20, metavar="N",
                        help="first print the run's newest N events (default 20)")


def run(args: argparse.Namespace) -> int:
    """Follow the run (local, or HOST:RUN over ssh)."""
    from yolotui.fleet.hosts import split_remote

    host, name = split_remote(args.run)
    if host is not None:
        return _remote(host, name, args.json)
    from pathlib import Path

    from yolotui.runs.resolve import resolve_run

    return _local(Path(resolve_run(name)), args.json, max(0, args.tail))


def _emit(item: dict, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps(item, default=str) + "\n")
    else:
        line = human(item)
        if line:
            sys.stdout.write(line + "\n")
    sys.stdout.flush()


def human(item: dict) -> str:
    """One line for a person, or '' for the lines only a program needs."""
    kind = item.get("type")
    if kind == "status":
        from yolotui.formatting import epochs

        best = item.get("best_map")
        return (f"{item.get('name')}: {item.get('state')}, epoch {epochs(item.get('epoch'), item.get('epochs'))}"
                + (f", best mAP50-95 {best:.4f}" if isinstance(best, (int, float)) else ""))
    if kind == "end":
        return f"run ended: {item.get('state')}"
    if kind == "link":
        return (f"[{item.get('host')}] link lost ({item.get('reason')}); reconnecting…" if item.get("state") == "lost"
                else f"[{item.get('host')}] link back")
    if kind == "error":
        return f"[{item.get('host')}] {item.get('message')}"
    if kind in ("epoch", "checkpoint", "start", "exit", "restart", "stop"):
        detail = {k: v for k, v in item.items() if k not in ("ts", "type", "attempt")}
        return f"{kind}: " + ", ".join(f"{k}={v}" for k, v in list(detail.items())[:6])
    return ""


def _remote(host, name: str, as_json: bool) -> int:
    from yolotui.fleet.stream import follow

    state = None
    for item in follow(host, name):
        _emit(item, as_json)
        if item.get("type") == "end":
            state = item.get("state")
        if item.get("type") == "error":
            return 1
    return 0 if state is not None else 1


def _stdin_selector() -> selectors.BaseSelector | None:
    """A selector on stdin when it is a pipe or socket (ssh's channel): its end means the reader left."""
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError, AttributeError):
        return None
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return None
    selector = selectors.DefaultSelector()
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ)
    return selector


def _stdin_closed(selector: selectors.BaseSelector | None, wait: float) -> bool:
    if selector is None:
        time.sleep(wait)
        return False
    if selector.select(timeout=wait):
        try:
            return not os.read(sys.stdin.fileno(), 4096)
        except OSError:
            return True
    return False


def _tail(path, keep: int) -> tuple[list[dict], int]:
    """The newest `keep` events within the file's last TAIL_BYTES, and the offset to follow from."""
    from yolotui.runs.events import parse_lines
    from yolotui.runs.tailread import tail_window

    data, start = tail_window(path, TAIL_BYTES)
    events, consumed = parse_lines(data)
    return (events[-keep:] if keep else []), start + consumed


def _local(run_dir, as_json: bool, keep: int) -> int:
    from yolotui.runs.eventlog import RunFollower
    from yolotui.runs.layout import EVENTS_JSONL, LIVE_STATES
    from yolotui.runs.summary import summarize

    events_path = run_dir / EVENTS_JSONL
    summary = summarize(run_dir).to_dict()
    _emit({"type": "status", **summary}, as_json)
    recent, offset = _tail(events_path, keep)
    for event in recent:
        _emit(event, as_json)
    follower = RunFollower(run_dir, offset, batch_tail=0)  # events.jsonl from `offset`, new batch events only
    selector = _stdin_selector()
    last_out = last_status = last_batch = time.monotonic()
    pending_batch = None
    while summary["state"] in LIVE_STATES:
        if _stdin_closed(selector, 0.25):
            return 0
        now = time.monotonic()
        for event in follower.poll():
            if event.get("type") == "batch":
                pending_batch = event
                continue
            _emit(event, as_json)
            last_out = now
        if pending_batch is not None and now - last_batch >= BATCH_GAP_S:
            _emit(pending_batch, as_json)
            pending_batch, last_batch, last_out = None, now, now
        if now - last_status >= STATUS_EVERY_S:
            last_status = now
            fresh = summarize(run_dir).to_dict()
            if {k: v for k, v in fresh.items() if k != "checkpoint_age"} != {
                    k: v for k, v in summary.items() if k != "checkpoint_age"}:
                _emit({"type": "status", **fresh}, as_json)
                last_out = now
            summary = fresh
        if as_json and now - last_out >= HEARTBEAT_S:
            _emit({"type": "heartbeat", "ts": time.time()}, as_json)
            last_out = now
    for event in follower.poll():
        _emit(event, as_json)
    _emit({"type": "end", "state": summary["state"], "name": summary["name"]}, as_json)
    return 0
