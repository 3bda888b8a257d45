"""A mirror in a local or mounted folder (a second disk, NFS, a bucket mounted with gcsfuse or mountpoint-s3).

Each file is written to a temporary file beside its final name, flushed, fsynced and renamed over it
(yolotui.runs.atomic); a copy cut short leaves `.NAME.XXXX.tmp`, which the next copy clears. The files that only
grow (results.csv, events.jsonl) are extended by their new lines instead (yolotui.mirror.snapshot.extend_copy),
so a copy costs what the run added since the last one, not its whole history.

YOLOTUI_MIRROR_FAULT=full (a testing aid) makes every write fail as on a full disk, where a real full file
system cannot be mounted for a test.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from yolotui.mirror.snapshot import GROWING, copy_plain, extend_copy, sha256_file
from yolotui.mirror.stores import MAX_SMALL_BYTES, CopyError, Store
from yolotui.runs.atomic import atomic_open, fsync_dir

FAULT_VAR = "YOLOTUI_MIRROR_FAULT"


class LocalStore(Store):
    """TARGET/RUN_NAME as a folder of this machine."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.where = str(self.root)

    def _fail(self, what: str, exc: OSError) -> CopyError:
        return CopyError(f"{self.where}: cannot {what} ({exc.strerror or exc})")

    def prepare(self) -> None:
        """Create the folder and weights/, and clear temporaries left by a copy cut short."""
        try:
            (self.root / "weights").mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self._fail("create the mirror folder", exc) from None
        for folder in (self.root, self.root / "weights"):
            for leftover in folder.glob(".*.tmp"):
                try:
                    leftover.unlink()
                except OSError:
                    pass

    def put(self, stage: Path, rels: list[str]) -> None:
        """Copy each staged file over its counterpart, atomically."""
        for rel in rels:
            try:
                if os.environ.get(FAULT_VAR) == "full":
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC) + f" ({FAULT_VAR})")
                if rel in GROWING:
                    extend_copy(Path(stage) / rel, self.root / rel)
                    continue
                with open(Path(stage) / rel, "rb") as reader, atomic_open(self.root / rel, "wb") as writer:
                    shutil.copyfileobj(reader, writer, 1 << 20)
            except OSError as exc:
                raise self._fail(f"write {rel}", exc) from None

    def read_small(self, rel: str) -> bytes | None:
        """The file's bytes when it exists and is small."""
        try:
            with open(self.root / rel, "rb") as handle:
                data = handle.read(MAX_SMALL_BYTES + 1)
        except OSError:
            return None
        return data if len(data) <= MAX_SMALL_BYTES else None

    def sha256(self, rel: str) -> str | None:
        """Hash the stored file (read back from the disk it landed on)."""
        try:
            return sha256_file(self.root / rel)
        except OSError:
            return None

    def rename(self, source_rel: str, target_rel: str) -> None:
        """os.replace inside the folder, then fsync the folder."""
        try:
            os.replace(self.root / source_rel, self.root / target_rel)
        except OSError as exc:
            raise self._fail(f"rename {source_rel}", exc) from None
        fsync_dir((self.root / target_rel).parent)

    def get(self, rels: list[str], into: Path) -> list[str]:
        """Copy the files that exist into `into`, never following a link."""
        found = []
        for rel in rels:
            destination = Path(into) / rel
            destination.parent.mkdir(parents=True, exist_ok=True)
            try:
                if copy_plain(self.root / rel, destination):
                    found.append(rel)
            except OSError as exc:
                raise self._fail(f"read {rel}", exc) from None
        return found
