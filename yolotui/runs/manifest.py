"""Keeping a checkpoint and its manifest in step across a kill between their two renames (torch-free).

The trainer writes a checkpoint's new manifest first as `last.pt.json.next`, then replaces last.pt, then
renames the pending manifest over last.pt.json (engine/train/checkpoint.py). A SIGKILL between those steps leaves a
pending manifest: `reconcile` finishes the job when the pending manifest describes the checkpoint now in
place (same size and sha256: the checkpoint's rename happened), and drops it otherwise (it did not). So a
checkpoint matches its manifest again once the run's supervisor has seen the attempt end, and before any
launch or resume starts.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from yolotui.runs.atomic import fsync_dir, read_json
from yolotui.runs.layout import BEST_PT, LAST_PT, manifest_path, weights_dir

PENDING_SUFFIX = ".next"


def pending_manifest_path(checkpoint: Path) -> Path:
    """Where the manifest of a checkpoint being written waits (`last.pt.json.next`)."""
    path = manifest_path(checkpoint)
    return path.with_name(path.name + PENDING_SUFFIX)


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def reconcile(checkpoint: Path) -> str | None:
    """Settle a pending manifest left by a kill mid-save; returns what was done, or None when nothing was."""
    checkpoint = Path(checkpoint)
    pending = pending_manifest_path(checkpoint)
    if not pending.exists():
        return None
    data = read_json(pending)
    try:
        size = os.stat(checkpoint).st_size
        matches = isinstance(data, dict) and data.get("bytes") == size and data.get("sha256") == sha256_of(checkpoint)
    except OSError:
        matches = False
    if matches:
        os.utime(pending)
        os.replace(pending, manifest_path(checkpoint))
        fsync_dir(checkpoint.parent)
        return f"{checkpoint.name}: its save was cut short after the checkpoint was in place; manifest completed"
    try:
        pending.unlink()
    except FileNotFoundError:
        pass
    return f"{checkpoint.name}: its save was cut short before the checkpoint was replaced; kept the previous one"


def reconcile_run(run_dir: Path) -> list[str]:
    """`reconcile` last.pt and best.pt of a run; the lines saying what was done."""
    done = []
    for name in (LAST_PT, BEST_PT):
        try:
            note = reconcile(weights_dir(run_dir) / name)
        except OSError:
            note = None
        if note:
            done.append(note)
    return done
