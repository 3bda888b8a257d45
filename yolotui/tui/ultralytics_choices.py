"""The resume wizard's choices for an ultralytics run (yolotui/tui/screens/wizard_resume.py asks here).

ultralytics resumes from weights/last.pt only (no other checkpoint: `--from` is not offered), extends a
finished run from last.pt or the shim's last.unstripped.pt, and starts the original command over when last.pt
is not usable. Its batch size comes from args.yaml.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def ultralytics_batch(run_dir: Path) -> int | None:
    """The run's batch from ultralytics' args.yaml (its save_dir), or None."""
    from yolotui.backends.ultralytics import save_dir
    from yolotui.backends.ultralytics.launch import read_args_yaml

    value = read_args_yaml(save_dir(Path(run_dir))).get("batch")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def ultralytics_choices(choices: list[Any], diagnosis: Any, start_over: Any, from_key: str) -> list[Any]:
    """The generic choices without resuming from another checkpoint (`from_key`), with `start_over` first when
    last.pt is not usable."""
    from yolotui.health.report import RESTART
    from yolotui.health.verdict import FINISHED, RESUMABLE

    kept = [c for c in choices if c.key != from_key]
    if diagnosis.recommended == RESTART or diagnosis.last.verdict not in (RESUMABLE, FINISHED):
        kept.insert(0, start_over)
    return kept
