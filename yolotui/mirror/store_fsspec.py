"""A mirror at an fsspec URL: s3:// (s3fs), gs:// (gcsfs), az:// (adlfs), file://, memory:// (tests) ...

Credentials come the way each package reads them (the environment, ~/.aws, the instance's role); nothing is
stored in run.yaml. Each file is uploaded under `NAME.mirror-tmp` (one fixed name, overwritten by the next
try, never piled up) and then moved over its final name; an object store's upload of an object is whole by
nature, a file system's move is a rename. Checkpoints are checked by reading the stored object back and
hashing it, since object stores report no sha256 of their own.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from yolotui.mirror.stores import MAX_SMALL_BYTES, CopyError, Store
from yolotui.mirror.target import Target

TMP_SUFFIX = ".mirror-tmp"


class FsspecStore(Store):
    """TARGET/RUN_NAME behind an fsspec file system."""

    def __init__(self, target: Target, name: str) -> None:
        import fsspec

        self.where = target.join(name)
        try:
            self.fs: Any
            self.fs, self.root = fsspec.core.url_to_fs(self.where)
        except (ImportError, ValueError) as exc:
            raise CopyError(f"{self.where}: cannot open it ({exc})") from None

    def _path(self, rel: str) -> str:
        return f"{self.root.rstrip('/')}/{rel}"

    def _fail(self, what: str, exc: Exception) -> CopyError:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        return CopyError(f"{self.where}: cannot {what} ({str(reason).splitlines()[0][:300]})")

    def prepare(self) -> None:
        """makedirs (a no-op on object stores)."""
        try:
            self.fs.makedirs(self._path("weights"), exist_ok=True)
        except Exception as exc:  # each backend raises its own errors
            raise self._fail("create the mirror folder", exc) from None

    def put(self, stage: Path, rels: list[str]) -> None:
        """Upload to NAME.mirror-tmp, then move it over NAME."""
        for rel in rels:
            final = self._path(rel)
            try:
                self.fs.put_file(str(Path(stage) / rel), final + TMP_SUFFIX)
                self.fs.mv(final + TMP_SUFFIX, final)
            except Exception as exc:
                raise self._fail(f"upload {rel}", exc) from None

    def read_small(self, rel: str) -> bytes | None:
        """The object's bytes when it exists and is small."""
        try:
            with self.fs.open(self._path(rel), "rb") as handle:
                data = handle.read(MAX_SMALL_BYTES + 1)
        except Exception:
            return None
        return data if len(data) <= MAX_SMALL_BYTES else None

    def sha256(self, rel: str) -> str | None:
        """Read the stored object back and hash it."""
        digest = hashlib.sha256()
        try:
            with self.fs.open(self._path(rel), "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise self._fail(f"read back {rel}", exc) from None
        return digest.hexdigest()

    def rename(self, source_rel: str, target_rel: str) -> None:
        """fs.mv inside the run's folder."""
        try:
            self.fs.mv(self._path(source_rel), self._path(target_rel))
        except Exception as exc:
            raise self._fail(f"rename {source_rel}", exc) from None

    def get(self, rels: list[str], into: Path) -> list[str]:
        """Download the objects that exist."""
        found = []
        for rel in rels:
            destination = Path(into) / rel
            destination.parent.mkdir(parents=True, exist_ok=True)
            try:
                if not self.fs.isfile(self._path(rel)):
                    continue
                self.fs.get_file(self._path(rel), str(destination))
            except Exception as exc:
                raise self._fail(f"fetch {rel}", exc) from None
            found.append(rel)
        return found
