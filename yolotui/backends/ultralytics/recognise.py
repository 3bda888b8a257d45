"""Tell an ultralytics training command from any other: `yolo train ...`, `yolo detect train ...`,
`ultralytics train ...`, `python -m ultralytics train ...`, or `python script.py ...` whose source calls
`YOLO(...).train(` (read, bounded, never run).

Nothing here imports ultralytics (it is AGPL-3.0 and may live in another interpreter): the ultralytics
arguments are read as the text they are (`key=value` pairs, a task word, a mode word), the way its own CLI
reads them. `recognise_command(argv)` returns an `UltralyticsCommand` or None (then the command stays an
opaque `exec` run).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from yolotui.errors import UserError

CLI = "cli"
SCRIPT = "script"
ENTRY_POINTS = ("yolo", "ultralytics")
TASKS = ("detect", "segment", "classify", "pose", "obb", "semantic", "depth")
MAX_SCRIPT_BYTES = 1 << 20  # a training script is a few kB; only its start is read
MAX_SHEBANG_BYTES = 512
_PYTHON_NAME = re.compile(r"^python(\d+(\.\d+)?)?$")
_IMPORTS_ULTRALYTICS = re.compile(r"^\s*(from\s+ultralytics(\.\S+)?\s+import\b|import\s+ultralytics\b)", re.MULTILINE)
_CALLS_TRAIN = re.compile(r"\.train\s*\(")


@dataclass
class UltralyticsCommand:
    """An ultralytics training command: the interpreter that runs it, the form (cli: ultralytics' own
    `key=value` arguments; script: a Python file and its arguments) and the arguments."""

    python: str
    mode: str = CLI
    args: list[str] = field(default_factory=list)
    script: Path | None = None

    def overrides(self) -> dict[str, str]:
        """The `key=value` arguments of a cli command (later ones win), as text."""
        return parse_overrides(self.args) if self.mode == CLI else {}

    @property
    def task(self) -> str:
        """The task the command trains (detect unless it names another)."""
        words = [a for a in self.args if "=" not in a]
        named = self.overrides().get("task")
        return named or next((w for w in words if w in TASKS), "detect")


def parse_overrides(args: list[str]) -> dict[str, str]:
    """{key: value} of ultralytics `key=value` arguments (a leading `--` dropped, as ultralytics does)."""
    found: dict[str, str] = {}
    for arg in args:
        text = arg[2:] if arg.startswith("--") else arg
        key, sep, value = text.partition("=")
        if sep and key.strip():
            found[key.strip()] = value.strip()
    return found


def is_train(args: list[str]) -> bool:
    """True when ultralytics arguments ask for training (`train`, or `mode=train`)."""
    return "train" in args or parse_overrides(args).get("mode") == "train"


def shebang_python(program: str) -> str | None:
    """The interpreter named by the `#!` line of a console script (`yolo`), or None."""
    path = program if os.sep in program else shutil.which(program)
    if not path:
        return None
    try:
        with open(path, "rb") as handle:
            head = handle.read(MAX_SHEBANG_BYTES)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    line = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    parts = line.split()
    if not parts:
        return None
    if Path(parts[0]).name == "env" and len(parts) > 1:  # `#!/usr/bin/env python3`
        return shutil.which(parts[1]) or parts[1]
    return parts[0]


def script_calls_train(path: Path) -> bool:
    """True when the Python file imports ultralytics and calls `.train(` (its first MAX_SCRIPT_BYTES, read only)."""
    try:
        with open(path, "rb") as handle:
            text = handle.read(MAX_SCRIPT_BYTES).decode("utf-8", "replace")
    except OSError:
        return False
    return bool(_IMPORTS_ULTRALYTICS.search(text)) and bool(_CALLS_TRAIN.search(text))


def _python_and_rest(argv: list[str]) -> tuple[str, list[str]] | None:
    """(interpreter, what follows its own options) when argv[0] is a Python interpreter, else None."""
    if not _PYTHON_NAME.match(Path(argv[0]).name):
        return None
    rest = list(argv[1:])
    while rest and rest[0].startswith("-") and rest[0] != "-m":
        rest = rest[2:] if rest[0] in ("-W", "-X") else rest[1:]
    return argv[0], rest


def recognise_command(argv: list[str], cwd: Path | None = None) -> UltralyticsCommand | None:
    """The ultralytics training command in `argv`, or None (not one, or not training)."""
    if not argv:
        return None
    cwd = Path(cwd or Path.cwd())
    if Path(argv[0]).name in ENTRY_POINTS:
        if not is_train(argv[1:]):
            return None
        program = argv[0] if os.sep not in argv[0] or os.path.isabs(argv[0]) else str(cwd / argv[0])
        return UltralyticsCommand(python=shebang_python(program) or sys.executable, mode=CLI, args=list(argv[1:]))
    found = _python_and_rest(list(argv))
    if found is None:
        return None
    python, rest = found
    if len(rest) >= 2 and rest[0] == "-m" and rest[1] in ENTRY_POINTS:
        return UltralyticsCommand(python=python, mode=CLI, args=rest[2:]) if is_train(rest[2:]) else None
    if not rest or not rest[0].endswith(".py"):
        return None
    script = Path(rest[0]).expanduser()
    script = script if script.is_absolute() else cwd / script
    if not script.is_file() or not script_calls_train(script):
        return None
    return UltralyticsCommand(python=python, mode=SCRIPT, args=rest[1:], script=script.resolve())


def extra_arguments(text: str) -> list[str]:
    """The `key=value` ultralytics arguments typed as one line (shell quoting allowed); UserError otherwise."""
    import shlex

    try:
        parts = shlex.split(text or "")
    except ValueError as exc:
        raise UserError(f"extra arguments: {exc}; write them as key=value separated by spaces") from None
    for part in parts:
        key, sep, _ = part.partition("=")
        if not sep or not key or key.startswith("-"):
            raise UserError(f"extra arguments: {part!r} is not key=value (e.g. lr0=0.001 plots=False)")
    return parts
