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
    slurm_job: str | None = None  # the SLURM job id when the run was submitted to SLURM
    command: list[str] = field(default_factory=list)  # what the supervisor runs (status.json's command)
    notify_command: str | None = None  # a hook command the run's own run.yaml adds (never set by yolotui)

    def to_json(self) -> dict[str, Any]:
        """{'name', 'folder', 'state', 'verb', 'warnings', 'command'} (+ 'slurm_job', 'notify_command'): what
        `--json` prints."""
        data = {"name": self.name, "folder": str(self.run_dir), "state": self.state, "verb": self.verb,
                "warnings": list(self.warnings), "command": list(self.command)}
        if self.slurm_job:
            data["slurm_job"] = self.slurm_job
        if self.notify_command:
            data["notify_command"] = self.notify_command
        return data


def started(run_dir: Path, verb: str, warnings: list[str], notes: list[str] | None = None) -> StartedRun:
    """A StartedRun for `run_dir`, its state read back from status.json; a SLURM run's job id and the
    submit-time storage check are added to its notes (or warnings)."""
    from yolotui.runs.status import effective_state, read_status, slurm_job_of

    run_dir = Path(run_dir)
    status = read_status(run_dir)
    job = slurm_job_of(status)
    warnings, notes = list(warnings), list(notes or [])
    if job:
        from yolotui.runs.runconfig import run_yaml_field

        record = run_yaml_field(run_dir, "slurm") or {}
        if record.get("storage"):
            (warnings if record.get("storage_warning") else notes).append(str(record["storage"]))
        notes.append(f"submitted as SLURM job {job} ({run_dir / 'slurm.sh'}); `yolotui ls` shows its state")
    from yolotui.runs.runconfig import run_yaml_field

    own_notify = run_yaml_field(run_dir, "notify")
    hook = own_notify.get("command") if isinstance(own_notify, dict) else None
    return StartedRun(name=run_dir.name, run_dir=run_dir, state=effective_state(run_dir, status), verb=verb,
                      warnings=warnings, notes=notes, slurm_job=job,
                      command=[str(a) for a in (status.command if status is not None and status.command else [])],
                      notify_command=hook if isinstance(hook, str) and hook.strip() else None)
