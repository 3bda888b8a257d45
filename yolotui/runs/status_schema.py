"""The types of status.json's fields, checked by every reader so one bad field never crashes a screen.

`status_problem(data)` returns None for a well-formed status, else one line such as
`started: expected a number`; readers then show `unreadable: status.json: started: expected a number`
(`unreadable_line`) and go on with what else they know. Kept free of `dataclasses` and
other slow imports: `yolotui ls` uses it.
"""

from __future__ import annotations

import math

_NUMBER = "a number"
_INT = "a whole number"
_TEXT = "text"
_BOOL = "true or false"

# field -> (expected kind, may be null)
FIELDS = {
    "name": (_TEXT, False), "run_dir": (_TEXT, False), "state": (_TEXT, False),
    "attempt": (_INT, False), "max_attempts": (_INT, False),
    "supervisor_pid": (_INT, True), "trainer_pid": (_INT, True),
    "started": (_NUMBER, True), "updated": (_NUMBER, True), "ended": (_NUMBER, True),
    "exit_code": (_INT, True), "exit_signal": (_INT, True),
    "failure_class": (_TEXT, True), "message": (_TEXT, True), "backend": (_TEXT, False), "device": (_TEXT, True),
    "command": ("a list of text", False), "attempts": ("a list of objects", False),
    "remedies": ("a list of objects", False), "stop": ("an object", True),
    "earlier_seconds": (_NUMBER, False), "launching": (_BOOL, False), "notifications": ("an object", True),
    "queue": ("an object", True), "slurm": ("an object", True), "gpu_summary": ("a list of objects", True),
    "mirror": ("an object", True),
}


def _fits(kind: str, value: object) -> bool:
    if kind == _TEXT:
        return isinstance(value, str)
    if kind == _BOOL:
        return isinstance(value, bool)
    if kind == _INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == _NUMBER:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if kind == "a list of text":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == "a list of objects":
        return isinstance(value, list) and all(isinstance(v, dict) for v in value)
    if kind == "an object":
        return isinstance(value, dict)
    return True


def status_problem(data: object) -> str | None:
    """None when `data` (parsed status.json) has the right types; else 'FIELD: expected KIND'."""
    if not isinstance(data, dict):
        return f"expected a JSON object, got {type(data).__name__}"
    for key, (kind, nullable) in FIELDS.items():
        if key not in data:
            continue
        value = data[key]
        if value is None and nullable:
            continue
        if not _fits(kind, value):
            return f"{key}: expected {kind}"
    return None


def unreadable_line(file_name: str, problem: str) -> str:
    """'unreadable: status.json: started: expected a number'."""
    return f"unreadable: {file_name}: {problem}"
