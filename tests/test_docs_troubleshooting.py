"""docs/troubleshooting.md has an entry for every failure class the supervisor can record."""

from __future__ import annotations

import re
from pathlib import Path

from yolotui.supervisor import decision, slurm_job

ROOT = Path(__file__).resolve().parent.parent


def failure_classes() -> set[str]:
    """The classes named in decision.py, SLURM's time limit, and any literal `failure_class="..."` in the code."""
    source = Path(decision.__file__).read_text(encoding="utf-8")  # the constants it defines, not those it imports
    classes = set(re.findall(r"^[A-Z_]+ = \"([a-z][a-z-]*)\"", source, flags=re.MULTILINE))
    classes.add(slurm_job.TIMELIMIT)
    for path in (ROOT / "yolotui").rglob("*.py"):
        classes |= set(re.findall(r"failure_class=[\"']([a-z][a-z-]*)[\"']", path.read_text(encoding="utf-8")))
    return classes


def test_every_failure_class_has_an_entry():
    page = (ROOT / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^### `([a-z-]+)`", page, flags=re.MULTILINE))
    classes = failure_classes()
    assert {"oom", "host-oom", "comm", "nan", "data", "crash", "gpu-fault", "preempted", "hang"} <= classes
    assert sorted(classes - headings) == []
