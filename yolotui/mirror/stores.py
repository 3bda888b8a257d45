"""The operations a mirror target offers (Store; yolotui.mirror.push.store_for picks the one for a target).

A store is one run's folder at a target (TARGET/RUN_NAME/). Every file it puts lands whole or not at all (a
temporary name, then a rename; an object store's upload is whole by nature), so a copy cut short leaves the
previous file, never a torn one, and temporaries are reused or cleared, never piled up. `commit` checks that
each uploaded checkpoint has the sha256 its manifest names before the manifest is renamed into place.
"""

from __future__ import annotations

from pathlib import Path

from yolotui.errors import UserError

MAX_SMALL_BYTES = 1 << 20  # what read_small returns at most: manifests


class CopyError(UserError):
    """A copy to or from a target failed; the message is one line naming the target and the reason."""


class Check:
    """One checkpoint to commit: its path, the sha256 it must have, its pending and final manifest paths."""

    __slots__ = ("rel", "sha256", "pending_rel", "final_rel")

    def __init__(self, rel: str, sha256: str, pending_rel: str, final_rel: str) -> None:
        self.rel, self.sha256, self.pending_rel, self.final_rel = rel, sha256, pending_rel, final_rel


class Store:
    """One run's folder at a target; the subclasses say how each operation is done there."""

    where = ""

    def prepare(self) -> None:
        """Create the folder (and weights/) and clear temporaries a cut-short copy left."""
        raise NotImplementedError

    def put(self, stage: Path, rels: list[str]) -> None:
        """Upload stage/REL to REL for each of `rels`, each whole or not at all."""
        raise NotImplementedError

    def read_small(self, rel: str) -> bytes | None:
        """The bytes of a small file (at most MAX_SMALL_BYTES), or None when it is absent or bigger."""
        raise NotImplementedError

    def sha256(self, rel: str) -> str | None:
        """The sha256 of REL as stored at the target, or None when it is absent."""
        raise NotImplementedError

    def rename(self, source_rel: str, target_rel: str) -> None:
        """Rename one file inside the run's folder, replacing the target."""
        raise NotImplementedError

    def get(self, rels: list[str], into: Path) -> list[str]:
        """Download each REL that exists to into/REL; returns the ones found."""
        raise NotImplementedError

    def commit(self, checks: list[Check]) -> None:
        """Check every checkpoint's stored sha256, then rename each pending manifest into place."""
        for check in checks:
            stored = self.sha256(check.rel)
            if stored != check.sha256:
                raise CopyError(f"{self.where}/{check.rel}: the copy has sha256 {str(stored)[:12]}..., its manifest "
                                f"says {check.sha256[:12]}...; it will be copied again")
        for check in checks:
            self.rename(check.pending_rel, check.final_rel)
