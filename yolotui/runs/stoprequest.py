"""RUN/stop.request: what `yolotui stop` asks of the supervisor, read and written with types checked.

The file is JSON: `requested` (unix seconds), `force` (bool), `grace_s` (seconds, finite, 0 or more) and
`by` (who asked). Anything else in it, or a file that is not JSON at all, never crashes the reader: each bad
field falls back to its default (a graceful stop with the default grace) and `problem` says what was ignored,
for the supervisor's log.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

from yolotui.errors import UserError
from yolotui.runs.atomic import atomic_write_json

DEFAULT_GRACE_S = 30.0
MAX_BYTES = 64 * 1024


@dataclass
class StopRequest:
    """A parsed stop request; `problem` lists what was malformed and ignored ('' when nothing)."""

    requested: float
    force: bool = False
    grace_s: float = DEFAULT_GRACE_S
    by: str = "yolotui stop"
    problem: str = ""
    mtime_ns: int = 0


def check_grace(grace_s: object) -> float:
    """`grace_s` as a float when it is a finite number of seconds, 0 or more; UserError otherwise."""
    try:
        value = float(grace_s)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise UserError(f"grace period {grace_s!r}: give a number of seconds, 0 or more") from None
    if not math.isfinite(value) or value < 0:
        raise UserError(f"grace period {grace_s!r}: give a finite number of seconds, 0 or more "
                        "(use --force to stop at once)")
    return value


def write_stop_request(path: Path, force: bool, grace_s: float, by: str) -> None:
    """Write the request atomically (grace checked first)."""
    atomic_write_json(Path(path), {"requested": time.time(), "force": bool(force),
                                   "grace_s": check_grace(grace_s), "by": str(by)})


def read_stop_request(path: Path) -> StopRequest | None:
    """The request in `path`, or None when there is none; a malformed file is a graceful default request."""
    path = Path(path)
    try:
        st = os.stat(path)
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except OSError:
        return None
    request = StopRequest(requested=st.st_mtime, mtime_ns=st.st_mtime_ns)
    problems: list[str] = []
    try:
        if len(raw) > MAX_BYTES:
            raise ValueError(f"larger than {MAX_BYTES} bytes")
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        request.problem = f"not JSON ({str(exc)[:80]}); treated as a graceful stop"
        return request
    if not isinstance(data, dict):
        request.problem = f"expected a JSON object, got {type(data).__name__}; treated as a graceful stop"
        return request
    requested = data.get("requested")
    if requested is not None:
        if _finite_number(requested):
            request.requested = float(requested)
        else:
            problems.append("requested: expected a number")
    force = data.get("force", False)
    if isinstance(force, bool):
        request.force = force
    else:
        problems.append("force: expected true or false")
    if "grace_s" in data:
        grace = data["grace_s"]
        if _finite_number(grace) and grace >= 0:
            request.grace_s = float(grace)
        else:
            problems.append(f"grace_s: expected a finite number of seconds, 0 or more (got {str(grace)[:40]})")
    by = data.get("by")
    if isinstance(by, str) and by.strip():
        request.by = " ".join(by.split())[:200]
    elif by is not None:
        problems.append("by: expected text")
    if problems:
        request.problem = "; ".join(problems) + " (defaults used)"
    return request


def _finite_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
