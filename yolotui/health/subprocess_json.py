"""Running a yolotui module in a child Python and reading its JSON answer (how torch stays out of this process)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any


def child_env() -> dict[str, str]:
    """This environment with the folder holding the yolotui package first on PYTHONPATH (same code in the child)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2]) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def last_json_object(stdout: str) -> dict[str, Any] | None:
    """The last line of `stdout` that parses as a JSON object, or None."""
    for line in reversed(stdout.splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return None


def run_for_json(argv: list[str], timeout: float) -> dict[str, Any]:
    """Run `argv` (stdin from /dev/null, bounded in time) and return the last JSON object it printed, or
    {"error": ...} saying why there is none: it cannot be run, did not answer in time, or printed none."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                              check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"{argv[0]} did not answer within {timeout:g} s"}
    except OSError as exc:
        return {"error": f"cannot run {argv[0]}: {exc.strerror or exc}"}
    data = last_json_object(proc.stdout)
    if data is None:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"{argv[0]} failed (exit {proc.returncode}): {tail[:300]}"}
    return data
