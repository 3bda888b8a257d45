"""A consistent snapshot of a run's essentials, staged in RUN/.mirror/stage/ for a copy to read.

The trainer replaces a checkpoint by renaming a new file over it, its manifest after it (engine/train/
checkpoint.py). A snapshot pins each checkpoint with a hard link (a copy where links are not possible), hashes
what it pinned and keeps the manifest that describes exactly those bytes: the current one, or the pending
`.next` one when the snapshot fell between the trainer's two renames. A checkpoint that changed while it was
read is pinned again (a few times). A checkpoint without any manifest (a trainer that writes none) gets one
made from its bytes, so a restore can check it all the same. The small files (run.yaml, opt.yaml, hyp.yaml,
status.json) are copied as they are now; links in the run folder are never followed.

The files that only grow (results.csv, events.jsonl: GROWING) are kept between copies in RUN/.mirror/grown/ and
extended by their new complete lines (`extend_copy`), then linked into the stage: a copy at epoch 300 stages
what epoch 300 added, not the run's whole history. A file that was cut back (a resume drops the rows and events
past its checkpoint) no longer extends its copy, and is copied whole once.

In the stage every manifest waits as `weights/NAME.pt.json.next`; yolotui.mirror.push renames it into place
at the target only after the checkpoint it describes is there and checked.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yolotui.errors import UserError
from yolotui.runs.layout import (
    BEST_PT,
    EVENTS_JSONL,
    HYP_YAML,
    LAST_PT,
    OPT_YAML,
    RESULTS_CSV,
    RUN_YAML,
    STATUS_JSON,
    WEIGHTS_DIR,
)

MIRROR_DIR = ".mirror"  # in the run folder: the stage and the last copy's result
SMALL_FILES = (RUN_YAML, OPT_YAML, HYP_YAML, RESULTS_CSV, EVENTS_JSONL)  # copied first; status.json last
GROWING = (RESULTS_CSV, EVENTS_JSONL)  # append-only between resumes: sent by their new lines
GROWN_DIR = "grown"  # RUN/.mirror/grown: the growing files as of the last copy
CHECK_BYTES = 4096  # how much of a copy's start and end must match the file's for the copy to be extended
CHECKPOINTS = (LAST_PT, BEST_PT)
PENDING = ".next"
MAX_MANIFEST_BYTES = 1 << 20
PIN_TRIES = 6
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class SnapshotError(UserError):
    """The run's files could not be pinned consistently (one line says which and why)."""


@dataclass
class StagedCheckpoint:
    """One checkpoint in the stage: its name (last.pt), the manifest that matches its bytes, sha256 and size."""

    name: str
    manifest: dict[str, Any]
    manifest_bytes: bytes
    sha256: str
    bytes: int

    @property
    def rel(self) -> str:
        """Its path in the run folder and at the target: weights/last.pt."""
        return f"{WEIGHTS_DIR}/{self.name}"

    @property
    def manifest_rel(self) -> str:
        """weights/last.pt.json."""
        return f"{WEIGHTS_DIR}/{self.name}.json"

    @property
    def pending_rel(self) -> str:
        """weights/last.pt.json.next: where its manifest waits until the checkpoint is in place."""
        return f"{WEIGHTS_DIR}/{self.name}.json{PENDING}"


@dataclass
class Snapshot:
    """What one copy sends: the stage folder, the small files in it, the checkpoints, whether status.json is in."""

    stage: Path
    small: list[str] = field(default_factory=list)
    checkpoints: list[StagedCheckpoint] = field(default_factory=list)
    status: bool = False

    @property
    def bytes(self) -> int:
        """Bytes of everything staged."""
        total = sum(c.bytes for c in self.checkpoints)
        for rel in [*self.small, *([STATUS_JSON] if self.status else [])]:
            try:
                total += (self.stage / rel).stat().st_size
            except OSError:
                pass
        return total

    def last(self) -> StagedCheckpoint | None:
        """The staged last.pt, if any."""
        return next((c for c in self.checkpoints if c.name == LAST_PT), None)

    def discard(self) -> None:
        """Remove the stage."""
        shutil.rmtree(self.stage, ignore_errors=True)


def stage_dir(run_dir: Path) -> Path:
    """RUN/.mirror/stage."""
    return Path(run_dir) / MIRROR_DIR / "stage"


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _open_regular(path: Path) -> int | None:
    """A read descriptor of the regular file `path` (never through a link); None when it is absent."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SnapshotError(f"{path}: cannot read it ({exc.strerror or exc}); a run file must be a plain file") \
            from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SnapshotError(f"{path}: not a plain file; the mirror copies run files only as plain files")
    return fd


def copy_plain(source: Path, target: Path) -> bool:
    """Copy the regular file `source` to `target` (never following a link); False when `source` is absent."""
    fd = _open_regular(source)
    if fd is None:
        return False
    with os.fdopen(fd, "rb") as reader, open(target, "wb") as writer:
        shutil.copyfileobj(reader, writer, 1 << 20)
    return True


def extend_copy(source: Path, copy: Path) -> int | None:
    """Make `copy` hold `source`'s complete lines (up to its last newline), writing only what `copy` lacks when
    `copy` is a prefix of `source` (its first and last CHECK_BYTES compared), else rewriting it whole (atomically).
    Returns the bytes written (0: already up to date), or None when `source` is absent. Never follows a link;
    reads and writes in blocks, whatever the file's size."""
    from yolotui.runs.atomic import atomic_open

    fd = _open_regular(source)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as reader:
        end = _last_line_end(reader, os.fstat(reader.fileno()).st_size)  # a line being written waits
        try:
            held = os.fdopen(os.open(copy, os.O_RDWR | _NOFOLLOW), "r+b")
        except OSError:
            held = None
        if held is not None:
            with held:
                have = _prefix_length(reader, held, end)
                if have:
                    held.seek(0, os.SEEK_END)
                    _copy_range(reader, have, end, held.write)
                    held.flush()
                    os.fsync(held.fileno())
                    return end - have
        with atomic_open(copy, "wb") as writer:
            _copy_range(reader, 0, end, writer.write)
        return end


def _last_line_end(reader: Any, size: int) -> int:
    """The offset just past the last newline in the first `size` bytes (0 when there is none)."""
    position = size
    while position > 0:
        start = max(0, position - (64 << 10))
        reader.seek(start)
        found = reader.read(position - start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        position = start
    return 0


def _copy_range(reader: Any, start: int, end: int, write: Any) -> None:
    """Write bytes start..end of `reader` through `write`, in 1 MiB blocks."""
    reader.seek(start)
    while start < end:
        block = reader.read(min(1 << 20, end - start))
        if not block:
            raise OSError(f"the file shrank while it was copied (at byte {start} of {end})")
        write(block)
        start += len(block)


def _prefix_length(reader: Any, held: Any, end: int) -> int:
    """The length of the open copy `held` when it is a prefix of the first `end` bytes `reader` reads, else 0."""
    status = os.fstat(held.fileno())
    have = status.st_size
    if have == 0 or have > end or not stat.S_ISREG(status.st_mode):
        return 0
    for start in {0, max(0, have - CHECK_BYTES)}:
        length = min(CHECK_BYTES, have - start)
        held.seek(start)
        reader.seek(start)
        if held.read(length) != reader.read(length):
            return 0
    return have


def read_manifest(path: Path) -> tuple[dict[str, Any], bytes] | None:
    """A manifest (parsed, raw) read with a size bound; None when absent, unreadable or not a mapping."""
    fd = _open_regular(path)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as handle:
        raw = handle.read(MAX_MANIFEST_BYTES + 1)
    if len(raw) > MAX_MANIFEST_BYTES:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return (data, raw) if isinstance(data, dict) else None


def describes(manifest: dict[str, Any] | None, sha256: str, size: int) -> bool:
    """True when `manifest` names these bytes (sha256 and size)."""
    return isinstance(manifest, dict) and manifest.get("sha256") == sha256 and manifest.get("bytes") == size


def _pin(source: Path, staged: Path) -> None:
    """Hard-link `source` to `staged` (a copy where the file system cannot link)."""
    try:
        staged.unlink()
    except FileNotFoundError:
        pass
    try:
        os.link(source, staged, follow_symlinks=False)
        if not stat.S_ISREG(os.lstat(staged).st_mode):
            raise SnapshotError(f"{source}: not a plain file; the mirror copies checkpoints only as plain files")
    except OSError:
        if not copy_plain(source, staged):
            raise FileNotFoundError(source) from None


def stage_checkpoint(run_dir: Path, name: str, stage: Path) -> StagedCheckpoint | None:
    """Pin weights/NAME and the manifest that matches it into the stage; None when the run has no such checkpoint."""
    source = Path(run_dir) / WEIGHTS_DIR / name
    staged = stage / WEIGHTS_DIR / name
    manifest_file = source.with_name(name + ".json")
    pending_file = manifest_file.with_name(manifest_file.name + PENDING)
    for attempt in range(PIN_TRIES):
        try:
            before = os.lstat(source)
        except FileNotFoundError:
            return None
        try:
            _pin(source, staged)
        except FileNotFoundError:
            continue
        digest, size = sha256_file(staged), staged.stat().st_size
        after = os.lstat(source) if source.exists() else None
        changed_in_place = after is not None and after.st_ino == before.st_ino and (
            after.st_mtime_ns != before.st_mtime_ns or after.st_size != before.st_size)
        for candidate in (manifest_file, pending_file):
            found = read_manifest(candidate)
            if found is not None and describes(found[0], digest, size):
                return StagedCheckpoint(name, found[0], found[1], digest, size)
        if read_manifest(manifest_file) is None and read_manifest(pending_file) is None and not changed_in_place:
            made = {"sha256": digest, "bytes": size, "made_by": "yolotui mirror (the trainer wrote no manifest)"}
            return StagedCheckpoint(name, made, (json.dumps(made, indent=2) + "\n").encode(), digest, size)
        time.sleep(0.05 * (attempt + 1))  # the trainer is between its renames, or wrote in place: pin again
    raise SnapshotError(f"{source}: it changed {PIN_TRIES} times while being pinned, or no manifest matches it; "
                        "the next checkpoint will be copied")


def _stage_small(run_dir: Path, rel: str, stage: Path) -> bool:
    """Stage one small file; a GROWING one through its kept copy (extended, then linked). False when absent."""
    if rel not in GROWING:
        return copy_plain(run_dir / rel, stage / rel)
    grown = Path(run_dir) / MIRROR_DIR / GROWN_DIR / rel
    grown.parent.mkdir(parents=True, exist_ok=True)
    if extend_copy(Path(run_dir) / rel, grown) is None:
        return False
    try:
        os.link(grown, stage / rel, follow_symlinks=False)
    except OSError:
        return copy_plain(grown, stage / rel)
    return True


def take(run_dir: Path, stage: Path | None = None) -> Snapshot:
    """Stage the run's essentials (see the module docstring); SnapshotError when they cannot be pinned."""
    run_dir = Path(run_dir)
    stage = Path(stage) if stage is not None else stage_dir(run_dir)
    shutil.rmtree(stage, ignore_errors=True)
    (stage / WEIGHTS_DIR).mkdir(parents=True, exist_ok=True)
    snapshot = Snapshot(stage)
    try:
        for name in CHECKPOINTS:  # checkpoints first: the small files copied after them are at least as new
            staged = stage_checkpoint(run_dir, name, stage)
            if staged is not None:
                (stage / staged.pending_rel).write_bytes(staged.manifest_bytes)
                snapshot.checkpoints.append(staged)
        for rel in SMALL_FILES:
            if _stage_small(run_dir, rel, stage):
                snapshot.small.append(rel)
        snapshot.status = copy_plain(run_dir / STATUS_JSON, stage / STATUS_JSON)
    except BaseException:
        snapshot.discard()
        raise
    return snapshot
