"""The verdict an expert reaches before resuming from a checkpoint, and the fallback when it is bad.

- missing: no file.
- foreign: readable, but not a training checkpoint (a text file, a bare state_dict, a pickle that
  would run code when loaded, torch's legacy format).
- corrupt: torn (truncated zip, unreadable pickle, missing tensor storage), a CRC mismatch, or a
  manifest that disagrees with the file. The best other checkpoint in the same folder is named as
  the fallback: a resumable one first, then the most advanced.
- finished: all planned epochs done (yolotui: epoch >= epochs; official and ultralytics: epoch -1, stripped);
  it can be extended with more epochs or fine-tuned, not resumed.
- incomplete: a checkpoint missing what a resume needs (optimizer, EMA, epoch, total epochs):
  usable as weights for a fine-tune.
- resumable: everything a resume needs, with epochs left to train.

`epoch` in a verdict is the number of epochs completed, whichever layout the file has.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from yolotui import formatting
from yolotui.health import ultralytics_layout
from yolotui.health.checkpoint import (
    OFFICIAL,
    ULTRALYTICS,
    YOLOTUI,
    CheckpointInfo,
    inspect_checkpoint,
    manifest_path,
)

RESUMABLE = "resumable"
FINISHED = "finished"
CORRUPT = "corrupt"
INCOMPLETE = "incomplete"
FOREIGN = "foreign"
MISSING = "missing"
VERDICTS = (RESUMABLE, FINISHED, CORRUPT, INCOMPLETE, FOREIGN, MISSING)

REQUIRED_KEYS = {
    YOLOTUI: ("epoch", "model", "ema", "optimizer"),
    OFFICIAL: ("epoch", "model", "ema", "optimizer", "opt"),
    ULTRALYTICS: ("epoch", "ema", "optimizer", "train_args"),
}
FALLBACK_PATTERN = re.compile(r"^(?!\.).*\.(pt|pth)(\.(prev|bak|old))?$")
MAX_FALLBACK_CHECKS = 8


@dataclass
class CheckpointVerdict:
    """The diagnosis of one checkpoint file; `reasons` says why, in words a user can act on."""

    path: str
    verdict: str
    epoch: int | None = None  # epochs completed
    step: int | None = None
    total_epochs: int | None = None
    best_fitness: float | None = None
    size: int | None = None
    mtime: float | None = None
    age_s: float | None = None
    reasons: list[str] = field(default_factory=list)
    fallback: str | None = None
    # Further fields:
    kind: str | None = None
    fallback_verdict: str | None = None
    fallback_epoch: int | None = None
    info: CheckpointInfo | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form (with the scan's details under `info`)."""
        return asdict(self)


def _bare_state_dict(info: CheckpointInfo) -> bool:
    return bool(info.keys) and all("." in key for key in info.keys)


def _judge(info: CheckpointInfo, total_epochs: int | None) -> tuple[str, list[str]]:
    reasons: list[str] = []
    if not info.exists:
        return MISSING, [info.error or "file not found"]
    if info.unsafe_globals:
        return FOREIGN, [f"the pickle would call {', '.join(info.unsafe_globals[:3])} if loaded: not a checkpoint; "
                         "never load it with torch.load(weights_only=False)"]
    if info.torn:
        return CORRUPT, [info.error or "damaged file"]
    if info.manifest_ok is False:
        if info.manifest_stale and info.crc_ok:
            reasons.append("manifest is older than the checkpoint and disagrees with it ("
                           + "; ".join(info.manifest_problems) + "): the trainer stopped between the two writes")
        else:
            return CORRUPT, [f"manifest mismatch: {p}" for p in info.manifest_problems]
    if info.error:
        return FOREIGN, [info.error]
    if info.top_level is not None:
        return FOREIGN, [f"the pickle holds {info.top_level}, not a checkpoint dict"]
    if info.kind not in (YOLOTUI, OFFICIAL, ULTRALYTICS):
        if _bare_state_dict(info):
            return FOREIGN, ["a bare state_dict (weights only): usable as --weights to fine-tune, not to resume"]
        shown = ", ".join(info.keys[:8]) or "none"
        return FOREIGN, [f"not a training checkpoint (top-level keys: {shown})"]
    if info.kind == OFFICIAL and info.pickled_classes:
        reasons.append("official YOLOv9 layout with pickled classes: read by scanning, never unpickled")
    if info.kind == ULTRALYTICS:
        reasons.append(ultralytics_layout.describe_classes(info.pickled_classes))
    total = total_epochs if total_epochs is not None else info.total_epochs
    done = info.epochs_done
    if info.kind == ULTRALYTICS and info.epoch == -1:
        return FINISHED, [*reasons, f"training finished ({formatting.epochs_done(done, total)}) and stripped by "
                                    "ultralytics (epoch -1, no optimizer): ultralytics cannot resume or extend it; "
                                    "fine-tune it, or extend the run from weights/last.unstripped.pt (kept by "
                                    "yolotui's shim) with yolotui resume RUN --epochs N"]
    if info.kind == OFFICIAL and info.epoch == -1:
        return FINISHED, [*reasons, "training finished and stripped (epoch -1, no optimizer): fine-tune it; the "
                                    "official trainer cannot resume or extend a stripped checkpoint"]
    if total is not None and done is not None and done >= total:
        return FINISHED, [*reasons, f"all {total} epochs done: extend it with more epochs or fine-tune it"]
    missing = [key for key in REQUIRED_KEYS[info.kind] if key not in info.keys]
    if "optimizer" in info.keys and not info.has_optimizer:
        missing.append("optimizer (None)")
    if "ema" in info.keys and not info.has_ema and "ema" not in missing:
        missing.append("ema (None)")
    if total is None:
        missing.append("total epochs (no 'epochs', no opt['epochs'])")
    if missing:
        return INCOMPLETE, [*reasons, f"missing {', '.join(missing)}: cannot resume exactly; "
                                      "use it as weights to fine-tune"]
    if info.kind == YOLOTUI:
        for key, what in (("scheduler", "the lr schedule is rebuilt from the epoch"),
                          ("rng", "random streams restart: the resume is not bit-exact")):
            if key not in info.keys:
                reasons.append(f"no {key}: {what}")
    return RESUMABLE, [*reasons, f"resumes after {formatting.epochs_done(done, total, info.step)}"]


def diagnose_checkpoint(path: Path, total_epochs: int | None = None, verify_hash: bool = True,
                        find_fallback: bool = True) -> CheckpointVerdict:
    """Diagnose the checkpoint at `path`; `total_epochs` (when given) overrides the planned total it records."""
    info = inspect_checkpoint(Path(path), verify_hash=verify_hash)
    verdict, reasons = _judge(info, total_epochs)
    total = total_epochs if total_epochs is not None else info.total_epochs
    result = CheckpointVerdict(
        path=str(path), verdict=verdict, epoch=info.epochs_done, step=info.step, total_epochs=total,
        best_fitness=info.best_fitness, size=info.size if info.exists else None, mtime=info.mtime,
        age_s=(time.time() - info.mtime) if info.mtime is not None else None, reasons=reasons,
        kind=info.kind if info.exists else None, info=info)
    if find_fallback and verdict in (CORRUPT, MISSING):
        fallback = find_fallback_checkpoint(Path(path), total_epochs)
        if fallback is not None:
            result.fallback = fallback.path
            result.fallback_verdict = fallback.verdict
            result.fallback_epoch = fallback.epoch
            result.reasons.append(f"fallback: {Path(fallback.path).name} ({fallback.verdict}"
                                  + (f", {formatting.epochs_done(fallback.epoch, fallback.total_epochs)}"
                                     if fallback.epoch is not None else "") + ")")
        elif verdict == CORRUPT:
            result.reasons.append("no usable fallback checkpoint in the folder: start again or use other weights")
    return result


def _manifest_epoch(path: Path) -> int:
    try:
        value = json.loads(manifest_path(path).read_text(encoding="utf-8")).get("epoch")
        return int(value)
    except (OSError, ValueError, TypeError, AttributeError):
        return -1


def fallback_candidates(path: Path) -> list[Path]:
    """Other checkpoints in the same folder (best.pt, epochN.pt, previous copies), most promising first."""
    path = Path(path)
    try:
        names = [p for p in path.parent.iterdir() if p != path and p.is_file() and FALLBACK_PATTERN.match(p.name)]
    except OSError:
        return []

    def promise(candidate: Path) -> tuple[int, float]:
        try:
            mtime = candidate.stat().st_mtime
        except OSError:
            mtime = 0.0
        return (_manifest_epoch(candidate), mtime)

    return sorted(names, key=promise, reverse=True)


_RANK = {RESUMABLE: 0, FINISHED: 1, INCOMPLETE: 2}


def find_fallback_checkpoint(path: Path, total_epochs: int | None = None) -> CheckpointVerdict | None:
    """The best usable checkpoint beside `path`: resumable before finished before incomplete, then the most epochs."""
    usable: list[CheckpointVerdict] = []
    for candidate in fallback_candidates(path)[:MAX_FALLBACK_CHECKS]:
        verdict = diagnose_checkpoint(candidate, total_epochs, find_fallback=False)
        if verdict.verdict in _RANK:
            usable.append(verdict)
    if not usable:
        return None
    usable.sort(key=lambda v: (_RANK[v.verdict], -(v.epoch or 0), -(v.step or 0), -(v.mtime or 0)))
    return usable[0]
