"""The copying child: `python -m yolotui.mirror.copy RUN_DIR TARGET [--tries N] [--backoff S]`.

Started by the supervisor (yolotui.mirror.driver) after a checkpoint and at the run's end; never by training
itself, so a slow or failing target never holds a training step up. It runs at a lower CPU priority, dies with
the supervisor (PR_SET_PDEATHSIG) but not of a SIGTERM (a shutdown's, which must not cut the last copies short),
stages a snapshot (yolotui.mirror.snapshot), pushes it (yolotui.mirror.push)
and tries again after `backoff` seconds (doubling) up to `tries` times. Its one-line reasons go to stderr (the
supervisor's log); its result goes to RUN/.mirror/result.json: ok, error, at, seconds, tries, bytes, sent,
unchanged, epoch and step of the last.pt it left at the target. Exit code 0 on success, 1 on failure.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from yolotui.errors import UserError
from yolotui.mirror.snapshot import MIRROR_DIR, take
from yolotui.mirror.target import LOCAL, parse_target
from yolotui.runs.atomic import atomic_write_json

RESULT_FILE = "result.json"
_PR_SET_PDEATHSIG = 1


def result_path(run_dir: Path) -> Path:
    """RUN/.mirror/result.json."""
    return Path(run_dir) / MIRROR_DIR / RESULT_FILE


def _die_with_parent() -> None:
    """Ignore SIGTERM (a shutdown sends it to every process: the copy it interrupts is the one that matters most;
    the supervisor ends a copy with SIGKILL); SIGKILL when the supervisor dies (Linux); exit if it is gone."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # it died between the two looks
        raise SystemExit(1)


def copy_once(run_dir: Path, target_text: str) -> dict[str, Any]:
    """Stage and push one snapshot; the report's fields. UserError (one line) when it fails."""
    from yolotui.mirror.push import push, store_for

    target = parse_target(target_text, base=Path(run_dir))
    if target.kind == LOCAL:
        here, there = Path(run_dir).resolve(), Path(target.join(Path(run_dir).name)).resolve()
        if there == here or here in there.parents:
            raise UserError(f"--mirror {target}: the mirror of {here.name} would be the run folder itself; mirror "
                            "to a folder outside it (another disk, a mount, a bucket)")
    store = store_for(target, Path(run_dir).name)
    snapshot = take(run_dir)
    try:
        report = push(snapshot, store)
    finally:
        snapshot.discard()
    return {"sent": report.sent, "unchanged": report.unchanged, "bytes": report.bytes, "epoch": report.epoch,
            "step": report.step, "where": store.where}


def copy_with_retries(run_dir: Path, target_text: str, tries: int = 3, backoff_s: float = 5.0,
                      log: Any = None) -> dict[str, Any]:
    """`copy_once` up to `tries` times; the result record (ok or the last error)."""
    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    started = time.time()
    error = ""
    for attempt in range(1, max(1, tries) + 1):
        try:
            fields = copy_once(run_dir, target_text)
        except (UserError, OSError) as exc:
            error = str(getattr(exc, "strerror", None) or exc) if not isinstance(exc, UserError) else str(exc)
            log(f"mirror: copy {attempt}/{tries} to {target_text} failed: {error}")
            if attempt < tries:
                time.sleep(backoff_s * 2 ** (attempt - 1))
            continue
        return {"ok": True, "error": None, "at": time.time(), "seconds": round(time.time() - started, 3),
                "tries": attempt, **fields}
    return {"ok": False, "error": error, "at": time.time(), "seconds": round(time.time() - started, 3),
            "tries": tries}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the copying child (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m yolotui.mirror.copy")
    parser.add_argument("run_dir")
    parser.add_argument("target")
    parser.add_argument("--tries", type=int, default=3)
    parser.add_argument("--backoff", type=float, default=5.0)
    args = parser.parse_args(argv)
    _die_with_parent()
    try:
        os.nice(10)
    except OSError:
        pass
    run_dir = Path(args.run_dir).resolve()
    result = copy_with_retries(run_dir, args.target, args.tries, args.backoff)
    try:
        atomic_write_json(result_path(run_dir), result)
    except (OSError, UserError) as exc:
        print(f"mirror: cannot write {result_path(run_dir)}: {getattr(exc, 'strerror', None) or exc}",
              file=sys.stderr)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
