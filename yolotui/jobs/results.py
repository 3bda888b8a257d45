"""What a started run's use case returns, and what `--json` prints for it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class StartedRun:
    """A run that new run, resume, fine-tune or demo just started (its supervisor holds the lock).

    `verb` says what happened ('started', 'resumed', 'extending'); `warnings` are for the user; `notes`
    are facts worth a line (e.g. 'resumed from epoch 3, batch 10 of 20 epochs').
    """

    name: str
    run_dir: Path
    state: str
    verb: str = "started"
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """{'name', 'folder', 'state', 'verb', 'warnings'}: what `--json` prints."""
        return {"name": self.name, "folder": str(self.run_dir), "state": self.state, "verb": self.verb,
                "warnings": list(self.warnings)}


def started(run_dir: Path, verb: str, warnings: list[str], notes: list[str] | None = None) -> StartedRun:
    """A StartedRun for `run_dir`, its state read back from status.json."""
    from yolotui.runs.status import effective_state

    run_dir = Path(run_dir)
    return StartedRun(name=run_dir.name, run_dir=run_dir, state=effective_state(run_dir), verb=verb,
                      warnings=list(warnings), notes=list(notes or []))
