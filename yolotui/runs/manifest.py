"""Keeping a checkpoint and its manifest in step after a kill between their two renames (torch-free).

The trainer replaces last.pt, then its manifest (last.pt.json); a SIGKILL between the two leaves a new
last.pt beside the old manifest. `reconcile` finds that case (size or age differ, then the sha256 differs)
and rewrites the manifest from the checkpoint itself, read by the torch-free scanner (yolotui/health), so a
checkpoint always matches its manifest once the run's supervisor has seen the attempt end, and before any
launch or resume starts. A checkpoint that cannot be read is left alone for `yolotui doctor` to judge.
"""

from __future__ import annotations

import os
from pathlib import Path

from yolotui.runs.atomic import atomic_write_json, read_json
from yolotui.runs.layout import BEST_PT, LAST_PT, manifest_path, weights_dir


def reconcile(checkpoint: Path) -> str | None:
    """Rewrite `checkpoint`'s manifest when it no longer describes the file; returns what was done, or None."""
    from yolotui.health.checkpoint import file_sha256, inspect_checkpoint

    checkpoint = Path(checkpoint)
    mpath = manifest_path(checkpoint)
    try:
        ckpt_stat = os.stat(checkpoint)
    except OSError:
        return None
    manifest = read_json(mpath)
    manifest = manifest if isinstance(manifest, dict) else None
    if manifest is not None and manifest.get("bytes") == ckpt_stat.st_size:
        try:
            if os.stat(mpath).st_mtime_ns >= ckpt_stat.st_mtime_ns:
                return None  # written after the checkpoint, same size: the normal case, no hashing
        except OSError:
            pass
    digest = file_sha256(checkpoint)
    if manifest is not None and str(manifest.get("sha256", "")).lower() == digest:
        return None
    info = inspect_checkpoint(checkpoint, verify_hash=False)
    if info.error or info.torn or info.kind != "yolotui":
        return None
    old = manifest or {}
    atomic_write_json(mpath, {
        "sha256": digest, "bytes": ckpt_stat.st_size, "epoch": int(info.epoch or 0), "step": int(info.step or 0),
        "epochs": int(info.total_epochs or 0), "keys": sorted(info.keys), "format": info.format or old.get("format"),
        "date": old.get("date"), "rebuilt": "from the checkpoint after a kill between its two renames",
    })
    return f"rewrote {mpath.name}: it described an earlier {checkpoint.name}"


def reconcile_run(run_dir: Path) -> list[str]:
    """`reconcile` last.pt and best.pt of a run; the lines saying what was rewritten."""
    done = []
    for name in (LAST_PT, BEST_PT):
        try:
            note = reconcile(weights_dir(run_dir) / name)
        except (OSError, ValueError):
            note = None
        if note:
            done.append(note)
    return done
