"""Running a yolotui module in a child Python and reading its JSON answer (how torch stays out of this process)."""

from __future__ import annotations

import json
import os
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
