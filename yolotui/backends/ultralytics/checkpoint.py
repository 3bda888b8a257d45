"""Checkpoint verdicts of ultralytics runs, without torch (yolotui.health's zip + pickle scan).

`resume_usable` is the supervisor's check before it adds the ultralytics resume (named in run.yaml's
Backend.resume_usable); `extend_source` picks what `yolotui resume RUN --epochs N` can extend: last.pt while it still
holds its optimizer, else the shim's last.unstripped.pt (the final last.pt before ultralytics stripped it), else
nothing (a stripped last.pt is offered as a fine-tune instead, with the reason).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yolotui.backends.ultralytics.launch import UNSTRIPPED


@dataclass
class ExtendSource:
    """A checkpoint a resume or an extension can start from, with its verdict (None: nothing usable) and why."""

    path: Path | None
    verdict: Any
    reason: str


def verdict_of(path: Path, total_epochs: int | None = None) -> Any:
    """The health verdict of one checkpoint (no fallback search)."""
    from yolotui.health.verdict import diagnose_checkpoint

    return diagnose_checkpoint(Path(path), total_epochs=total_epochs, find_fallback=False)


def has_optimizer(verdict: Any) -> bool:
    """True when the scanned checkpoint still holds its optimizer state (ultralytics can resume from it)."""
    info = getattr(verdict, "info", None)
    return bool(info is not None and info.has_optimizer and info.epoch is not None and info.epoch >= 0)


def resume_usable(run_config: dict[str, Any]) -> bool:
    """Whether run.yaml's `resume_if_usable` checkpoint is one ultralytics can resume from: resumable by the
    scan, against the epochs stored in it (ultralytics resumes to those). The supervisor calls this through
    UltralyticsBackend.resume_usable (yolotui/supervisor/policy.py)."""
    from yolotui.health.verdict import RESUMABLE

    path = run_config.get("resume_if_usable")
    if not path:
        return True
    return verdict_of(Path(str(path))).verdict == RESUMABLE


def extend_source(weights: Path) -> ExtendSource:
    """What an extension of the run with this weights/ folder starts from (see the module docstring)."""
    from yolotui.health.verdict import FINISHED, RESUMABLE

    weights = Path(weights)
    last = verdict_of(weights / "last.pt")
    if last.verdict in (RESUMABLE, FINISHED) and has_optimizer(last):
        return ExtendSource(weights / "last.pt", last, "; ".join(last.reasons[-1:]))
    spare = weights / UNSTRIPPED
    if spare.exists():
        kept = verdict_of(spare)
        if kept.verdict in (RESUMABLE, FINISHED) and has_optimizer(kept):
            return ExtendSource(spare, kept, f"last.pt is stripped; {UNSTRIPPED} (kept by yolotui's shim before "
                                             "ultralytics stripped it) still has its optimizer")
    why = "; ".join(last.reasons) or last.verdict
    return ExtendSource(None, last, why)


def model_yaml_file(path: Path) -> str | None:
    """The model config file (`yaml_file`, e.g. yolov9t.yaml) the checkpoint's pickled model recorded, read by
    scanning the pickle (nothing is unpickled); None when it does not say."""
    from yolotui.health.container import ContainerError, read_container
    from yolotui.health.pickle_scan import Call, PickleScanError, scan_pickle

    try:
        top = scan_pickle(read_container(Path(path), check_crc=False).pickle_bytes).value
    except (ContainerError, PickleScanError, OSError, ValueError):
        return None
    if not isinstance(top, dict):
        return None
    for key in ("model", "ema"):
        model = top.get(key)
        state = model.state if isinstance(model, Call) else None
        state = state[0] if isinstance(state, tuple) and state and isinstance(state[0], dict) else state
        yaml = state.get("yaml") if isinstance(state, dict) else None
        if isinstance(yaml, dict) and isinstance(yaml.get("yaml_file"), str):
            return yaml["yaml_file"]
    return None


def doctor_advice(recommended: str, run_dir: Any, last: Any) -> tuple[str, str]:
    """(recommendation, the command that works) for an ultralytics run: ultralytics resumes from last.pt only,
    extends from last.pt or the shim's last.unstripped.pt, and fine-tunes anything else."""
    from pathlib import Path

    name = Path(run_dir).name
    stripped = bool(last.info is not None and last.info.epoch == -1)
    spare = Path(last.path).with_name("last.unstripped.pt").exists()
    finetune = f"fine-tune: yolotui finetune --backend ultralytics --from {name} --data NEW.yaml"
    if recommended == "resume":
        return recommended, f"yolotui resume {name}  (ultralytics' resume=True from {name}/weights/last.pt)"
    if recommended == "extend-or-finetune" and (not stripped or spare):
        return recommended, f"extend: yolotui resume {name} --epochs N; or {finetune}"
    if recommended in ("extend-or-finetune", "finetune", "resume-from-fallback"):
        why = "stripped, and no last.unstripped.pt to extend from" if stripped else "it cannot resume"
        return "finetune", f"{finetune} (last.pt is {why})"
    if recommended == "restart":
        return recommended, f"yolotui resume {name}  (no usable last.pt: it reruns the original command)"
    return recommended, ""
