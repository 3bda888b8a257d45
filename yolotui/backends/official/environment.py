"""What breaks the official YOLOv9 code in a trainer's interpreter: a bounded probe of `--python EXE`.

The probe runs `EXE -c PROBE` (standard library only, no package is imported: versions come from the package
metadata, so it answers in well under a second, even in an interpreter without yolotui) and reports the
versions of Python, torch, numpy and Pillow. `official_env_issues` turns them into warnings:

- numpy >= 2.4: `np.trapz` is gone; the official metrics call it, so validation dies once there are predictions;
- Pillow >= 10: `FreeTypeFont.getsize` is gone; the official plotting calls it (labels, mosaics);
- torch >= 2.6: `torch.load` defaults to weights_only=True, which breaks the official resume, strip_optimizer,
  val and `--weights yolov9-c.pt`; yolotui's shim allow-lists the official classes for the trainer's process
  (yolotui/backends/official/shim.py), so this one is a note, not a warning, for runs yolotui launches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from yolotui.health.subprocess_json import run_for_json

PROBE_TIMEOUT_S = 10.0

PROBE = r"""
import json, sys
try:
    from importlib import metadata
except ImportError:
    metadata = None
def version(*names):
    for name in names:
        try:
            return metadata.version(name)
        except Exception:
            pass
    return None
print(json.dumps({"python": sys.version.split()[0], "executable": sys.executable,
                  "torch": version("torch"), "numpy": version("numpy"), "pillow": version("Pillow", "pillow"),
                  "pyyaml": version("PyYAML", "pyyaml")}))
"""


@dataclass
class OfficialEnvIssue:
    """One finding: `level` is warning (the official code fails) or note (yolotui works around it)."""

    level: str
    message: str


def version_tuple(text: str | None) -> tuple[int, ...]:
    """(2, 4) for '2.4.0rc1'; () when unknown."""
    if not text:
        return ()
    numbers = re.findall(r"\d+", str(text).split("+")[0])[:2]
    return tuple(int(n) for n in numbers)


def probe_interpreter(python: str, timeout: float = PROBE_TIMEOUT_S) -> dict[str, Any]:
    """The versions in the interpreter `python` ({"error": ...} when it cannot be run or timed out)."""
    return run_for_json([python, "-c", PROBE], timeout)


def official_env_issues(facts: dict[str, Any]) -> list[OfficialEnvIssue]:
    """Warnings and notes for the official code from a probe's answer (see the module docstring)."""
    if facts.get("error"):
        return [OfficialEnvIssue("warning", f"trainer interpreter: {facts['error']}")]
    issues: list[OfficialEnvIssue] = []
    python = facts.get("executable") or "the trainer's Python"
    if not facts.get("torch"):
        issues.append(OfficialEnvIssue("warning", f"torch is not installed in {python}: the official trainer "
                                                  "cannot start; give --python the interpreter that has it"))
    numpy = version_tuple(facts.get("numpy"))
    if numpy >= (2, 4):
        issues.append(OfficialEnvIssue(
            "warning", f"numpy {facts['numpy']} in {python} has no np.trapz: the official metrics call it, so "
                       "validation fails once the model predicts boxes; install numpy<2.4 there"))
    pillow = version_tuple(facts.get("pillow"))
    if pillow >= (10,):
        issues.append(OfficialEnvIssue(
            "warning", f"Pillow {facts['pillow']} in {python} has no FreeTypeFont.getsize: the official plotting "
                       "fails (label and mosaic plots); install Pillow<10 there or train with --noplots"))
    torch = version_tuple(facts.get("torch"))
    if torch >= (2, 6):
        issues.append(OfficialEnvIssue(
            "note", f"torch {facts['torch']} loads weights_only=True by default, which breaks the official resume, "
                    "strip_optimizer, val and --weights *.pt; for runs yolotui launches its shim allow-lists the "
                    "official model classes in the trainer's process (nothing else is unpickled)"))
    return issues
