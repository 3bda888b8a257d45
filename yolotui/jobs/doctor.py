"""Doctor advice: diagnose a run or a checkpoint before resuming, and say what to do."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yolotui.errors import UserError


@dataclass
class DoctorRequest:
    """Diagnose `target` (a run folder or name, its weights/ folder, or a checkpoint file). `deep` also loads
    the checkpoint with torch in a subprocess; `environment` probes the torch environment."""

    target: str
    deep: bool = False
    environment: bool = True


@dataclass
class DoctorResult:
    """`healthy`: the run can go on as it is (resume, extend, or live) or the checkpoint is resumable.
    `report` is the health verdict (a CheckpointVerdict or a RunDiagnosis); `deep` the torch load result."""

    path: Path
    is_checkpoint: bool
    healthy: bool
    report: Any
    deep: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form `yolotui doctor --json` prints."""
        payload = self.report.to_dict()
        if self.is_checkpoint:
            payload["deep"] = self.deep
        return payload

    def text(self) -> str:
        """The plain-text report."""
        from yolotui.health.report import render_checkpoint_text, render_text

        if not self.is_checkpoint:
            return render_text(self.report)
        text = render_checkpoint_text(self.report)
        if self.deep is not None:
            state = "loaded it" if self.deep.get("ok") else f"refused it: {self.deep.get('error')}"
            text += f"deep      torch.load(weights_only=True) {state}\n"
        return text


def resolve_target(value: str) -> Path:
    """A checkpoint file as given; a run's weights/ folder as the run; else a run folder or indexed name."""
    from yolotui.runs.resolve import resolve_run

    path = Path(value).expanduser()
    if path.is_file():
        return path
    if path.is_dir() and path.name == "weights" and any((path / n).exists() for n in ("last.pt", "best.pt")):
        return path.parent
    return Path(resolve_run(value))


def diagnose_run(run_dir: Path, environment: bool = True, logind: bool = True, verify_hash: bool = True):
    """health.report.diagnose_run with the run's backend following its trainer's own folder (official runs)."""
    from yolotui.backends import get_backend
    from yolotui.health.report import diagnose_run as diagnose
    from yolotui.runs.runconfig import read_run_config

    try:
        backend = get_backend((read_run_config(run_dir) or {}).get("backend"))
    except (UserError, OSError, ValueError):
        backend = None
    follow = backend.follow if backend is not None else None
    advise = backend.doctor_advice if backend is not None else None
    return diagnose(run_dir, environment=environment, logind=logind, verify_hash=verify_hash, follow=follow,
                    advise=advise)


def doctor(request: DoctorRequest) -> DoctorResult:
    """Diagnose the target (the deep check runs torch in a child process, never here)."""
    from yolotui.health.deep import run_deep_check
    from yolotui.health.report import EXTEND, LIVE, RESUME
    from yolotui.health.verdict import FINISHED, RESUMABLE, diagnose_checkpoint

    target = resolve_target(request.target)
    if target.is_file():
        verdict = diagnose_checkpoint(target)
        deep = run_deep_check(target) if request.deep else None
        return DoctorResult(target, True, verdict.verdict in (RESUMABLE, FINISHED), verdict, deep)
    diagnosis = diagnose_run(target, environment=request.environment)
    if request.deep:
        chosen = diagnosis.recommended_checkpoint or str(Path(diagnosis.last.path))
        if Path(chosen).is_file():
            diagnosis.deep = {"path": chosen, **run_deep_check(Path(chosen))}
    return DoctorResult(target, False, diagnosis.recommended in (RESUME, EXTEND, LIVE), diagnosis)
