"""Disk space: the free-space check before a launch or resume, and the words for a full disk.

A run needs room for at least two checkpoints (the new last.pt is written beside the old one before the
rename) plus a margin for logs and events. The size of one checkpoint is taken from the run's own last.pt or
best.pt when there is one, else from a size hint (the initial weights), else a floor.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from yolotui.errors import UserError
from yolotui.runs.layout import BEST_PT, LAST_PT, WEIGHTS_DIR

MIN_CHECKPOINT_BYTES = 1 << 20  # a floor for runs that have no checkpoint yet and no size hint
MARGIN_BYTES = 16 << 20  # logs, events, results, status
DISK_TEXT = ("no space left on device", "disk quota exceeded", "errno 28", "enospc", "edquot")


def free_bytes(folder: Path) -> int | None:
    """Bytes free for this user on the file system holding `folder` (its nearest existing parent)."""
    probe = Path(folder)
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    try:
        return shutil.disk_usage(probe).free
    except OSError:
        return None


def human(nbytes: float | None) -> str:
    """'1.2 GB' style sizes (decimal units, as df -H)."""
    if nbytes is None:
        return "unknown"
    value = float(nbytes)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(value) < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"


def checkpoint_bytes(run_dir: Path, hint: int | None = None) -> int:
    """The size of one checkpoint of this run: its last.pt/best.pt, else `hint`, else a floor."""
    sizes = []
    for name in (LAST_PT, BEST_PT):
        try:
            sizes.append(os.stat(Path(run_dir) / WEIGHTS_DIR / name).st_size)
        except OSError:
            continue
    if sizes:
        return max(sizes)
    return max(int(hint or 0), MIN_CHECKPOINT_BYTES)


def check_room(run_dir: Path, hint: int | None = None) -> None:
    """UserError naming the folder and the free space unless there is room for two checkpoints."""
    need = 2 * checkpoint_bytes(run_dir, hint) + MARGIN_BYTES
    free = free_bytes(run_dir)
    if free is not None and free < need:
        raise UserError(f"not enough disk space in {run_dir}: {human(free)} free, a run needs at least "
                        f"{human(need)} (two checkpoints and logs); free some space or choose another --project")


def is_disk_full(exc: BaseException | None = None, text: str | None = None) -> bool:
    """True when an exception (or error text) says the disk or the quota is full."""
    if exc is not None and isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    lowered = (text or "").lower()
    return any(fragment in lowered for fragment in DISK_TEXT)


def disk_message(folder: Path) -> str:
    """'the disk holding FOLDER is full (N free)'."""
    return f"the disk holding {folder} is full ({human(free_bytes(folder))} free)"
