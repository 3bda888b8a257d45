"""`yolotui doctor RUN|PATH [--json] [--deep]`: diagnose a run or a checkpoint before resuming.

RUN is a run directory or a run name from the index; PATH a checkpoint file. Exit status: 0 when the
run can go on as it is (resume, extend, or live), 1 when it needs attention (damaged, incomplete,
foreign or missing checkpoint), 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The doctor's flags."""
    parser.add_argument("target", metavar="RUN|PATH", help="run directory, run name, or checkpoint file")
    parser.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    parser.add_argument("--deep", action="store_true",
                        help="also load the checkpoint with torch.load(weights_only=True) in a subprocess")
    parser.add_argument("--no-env", action="store_true", help="skip the torch environment probe")


def resolve_target(value: str) -> Path:
    """A path as given, else a run name looked up in the index (the jobs stream's resolve_run when present)."""
    path = Path(value).expanduser()
    if path.exists():
        return path
    try:
        from yolotui.runs.resolve import resolve_run  # written by the jobs stream
    except ImportError:
        resolve_run = None
    if resolve_run is not None:
        return Path(resolve_run(value))
    from yolotui.errors import UserError
    from yolotui.runs import index

    matches = [Path(e.path) for e in index.entries() if e.name == value or Path(e.path).name == value]
    unique = list(dict.fromkeys(matches))
    if len(unique) == 1:
        return unique[0]
    if len(unique) > 1:
        raise UserError(f"run name '{value}' is ambiguous ({', '.join(map(str, unique[:3]))}): give the path")
    raise UserError(f"no run or file '{value}': give a run directory, a checkpoint path, or a name from `yolotui ls`")


def run(args: argparse.Namespace) -> int:
    """Diagnose and print; exit 0 when healthy, 1 when the run or checkpoint needs attention."""
    from yolotui.health.deep import run_deep_check
    from yolotui.health.report import (
        EXTEND,
        LIVE,
        RESUME,
        diagnose_run,
        render_checkpoint_text,
        render_text,
    )
    from yolotui.health.verdict import FINISHED, RESUMABLE, diagnose_checkpoint

    target = resolve_target(args.target)
    if target.is_file():
        verdict = diagnose_checkpoint(target)
        deep = run_deep_check(target) if args.deep else None
        if args.json:
            payload = verdict.to_dict()
            payload["deep"] = deep
            print(json.dumps(payload, indent=2, default=str))
        else:
            text = render_checkpoint_text(verdict)
            if deep is not None:
                state = "loaded it" if deep.get("ok") else f"refused it: {deep.get('error')}"
                text += f"deep      torch.load(weights_only=True) {state}\n"
            sys.stdout.write(text)
        return 0 if verdict.verdict in (RESUMABLE, FINISHED) else 1
    if target.is_dir() and target.name == "weights" and not (target / "weights").is_dir():
        target = target.parent
    diagnosis = diagnose_run(target, environment=not args.no_env)
    if args.deep:
        chosen = diagnosis.recommended_checkpoint or str(Path(diagnosis.last.path))
        if Path(chosen).is_file():
            diagnosis.deep = {"path": chosen, **run_deep_check(Path(chosen))}
    if args.json:
        print(json.dumps(diagnosis.to_dict(), indent=2, default=str))
    else:
        sys.stdout.write(render_text(diagnosis))
    return 0 if diagnosis.recommended in (RESUME, EXTEND, LIVE) else 1
