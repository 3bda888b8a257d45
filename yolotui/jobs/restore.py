"""Resume --from CKPT: make another checkpoint of the run (best.pt, epochN.pt) its last.pt.

Used when last.pt is damaged or missing and doctor names a fallback. The damaged last.pt (and its manifest)
are kept beside it as `last.pt.damaged-<time>` for inspection; the chosen checkpoint is copied over
`last.pt` atomically (temp file, fsync, replace) with its manifest, so the trainer resumes from it exactly
as from any last.pt. Torch-free: the choice is checked with yolotui.health.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from yolotui.errors import UserError
from yolotui.runs import layout
from yolotui.runs.atomic import atomic_open, fsync_dir


def _copy_atomic(source: Path, target: Path) -> None:
    """Copy `source` over `target` through runs.atomic (a fresh temp file, never through a symlink)."""
    with open(source, "rb") as reader, atomic_open(target, "wb") as writer:
        shutil.copyfileobj(reader, writer, 1 << 20)


def restore_last(run_dir: Path, value: str) -> Path:
    """Copy checkpoint `value` (a path, or a file name in RUN/weights) over RUN/weights/last.pt; returns it."""
    from yolotui.health.verdict import FINISHED, RESUMABLE, diagnose_checkpoint

    weights = layout.weights_dir(run_dir)
    source = Path(value).expanduser()
    if not source.is_absolute() and not source.exists():
        source = weights / value
    if not source.is_file():
        raise UserError(f"--from {value}: no such checkpoint in {weights}")
    source = source.resolve()
    if source.parent != weights.resolve():
        raise UserError(f"--from {value}: resume takes a checkpoint of this run ({weights}); to start from "
                        "another run's weights use `yolotui finetune --from`")
    last = weights / layout.LAST_PT
    if source == last.resolve():
        return last
    verdict = diagnose_checkpoint(source, find_fallback=False)
    if verdict.verdict not in (RESUMABLE, FINISHED):
        reason = verdict.reasons[0] if verdict.reasons else verdict.verdict
        raise UserError(f"--from {source.name}: {verdict.verdict} ({reason}); it cannot be resumed from")
    manifest = layout.manifest_path(source)
    if not manifest.is_file():
        raise UserError(f"--from {source.name}: its manifest {manifest.name} is missing; resume needs it")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for old in (last, layout.manifest_path(last)):
        if old.exists():
            os.replace(old, old.with_name(f"{old.name}.damaged-{stamp}"))
    _copy_atomic(source, last)
    _copy_atomic(manifest, layout.manifest_path(last))
    fsync_dir(weights)
    return last
