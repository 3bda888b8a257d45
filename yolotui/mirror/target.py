"""What a mirror TARGET names: a local or mounted folder, `host:path` (rsync over ssh), or an fsspec URL.

`parse_target(text)` tells them apart the way rsync does: a URL has `://` (s3://bucket/runs, gs://..., az://...,
file:///mnt/x, memory://x); `host:path` has a colon before any slash (`box:/data/mirror`, `me@box:mirror`, a
path relative to the remote home); anything else is a path, made absolute here (the supervisor runs in the
run folder, not where the user typed the command). A run is mirrored to `TARGET/RUN_NAME/`; `split_run` reads
`TARGET/RUN_NAME` back for `yolotui restore`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from yolotui.errors import UserError

LOCAL = "local"
RSYNC = "rsync"
FSSPEC = "fsspec"

MAX_TARGET = 1000  # characters; a target is a path or a URL, never a document


@dataclass(frozen=True)
class Target:
    """A parsed mirror target: its kind (local, rsync, fsspec) and where (absolute path, host:path, URL)."""

    kind: str
    location: str

    @property
    def host(self) -> str:
        """The `[user@]host` of an rsync target ('' for the others)."""
        return self.location.partition(":")[0] if self.kind == RSYNC else ""

    @property
    def remote_path(self) -> str:
        """The path on the remote host of an rsync target ('' is the remote home folder)."""
        path = self.location.partition(":")[2] if self.kind == RSYNC else ""
        return path[2:] if path.startswith("~/") else ("" if path == "~" else path)

    @property
    def protocol(self) -> str:
        """The scheme of an fsspec URL ('' for the others)."""
        return self.location.partition("://")[0] if self.kind == FSSPEC else ""

    def join(self, name: str) -> str:
        """Where run `name` lives under this target, in the target's own notation."""
        if self.kind == LOCAL:
            return str(Path(self.location) / name)
        if self.kind == RSYNC:
            path = self.remote_path
            return f"{self.host}:{path.rstrip('/') + '/' if path else ''}{name}"
        return self.location.rstrip("/") + "/" + name

    def __str__(self) -> str:
        return self.location


def parse_target(text: str, base: Path | None = None) -> Target:
    """The Target that `text` names (relative local paths resolved against `base`, default the current folder);
    UserError with one line when it cannot be one."""
    raw = str(text or "").strip()
    if not raw:
        raise UserError("--mirror: empty target; give a folder, host:path or a URL such as s3://bucket/runs")
    if len(raw) > MAX_TARGET or any(ord(ch) < 32 for ch in raw):
        raise UserError(f"--mirror {raw[:40]!r}: not a usable target (too long or has control characters)")
    if "://" in raw:
        scheme = raw.partition("://")[0]
        if not scheme or not all(ch.isalnum() or ch in "+-." for ch in scheme):
            raise UserError(f"--mirror {raw}: {scheme!r} is not a URL scheme; give e.g. s3://bucket/runs")
        if not raw.partition("://")[2].strip("/"):
            raise UserError(f"--mirror {raw}: name a bucket or folder after {scheme}://")
        return Target(FSSPEC, raw)
    head, colon, _ = raw.partition(":")
    if colon and head and "/" not in head:
        if head.startswith("-") or any(ch.isspace() for ch in head):
            raise UserError(f"--mirror {raw}: {head!r} is not a host name; give host:path, e.g. box:/data/mirror")
        return Target(RSYNC, raw)
    path = Path(os.path.expanduser(raw))
    if not path.is_absolute():
        path = (base or Path.cwd()) / path
    return Target(LOCAL, os.path.normpath(str(path)))


def check_usable(target: Target, in_child: bool = True) -> None:
    """UserError (one line) when this machine cannot write to `target`'s kind at all: fsspec or its protocol's
    package missing, rsync missing; `in_child` refuses memory://, which lives inside one process only."""
    import shutil

    if target.kind == RSYNC and shutil.which("rsync") is None:
        raise UserError(f"--mirror {target}: rsync is not installed here; install it (apt-get install rsync) "
                        "or mirror to a mounted folder or a URL")
    if target.kind != FSSPEC:
        return
    if in_child and target.protocol == "memory":
        raise UserError(f"--mirror {target}: memory:// lives inside one process and is gone when the copy "
                        "ends; use file://, a folder or a bucket")
    try:
        import fsspec
    except ImportError:
        raise UserError(f"--mirror {target}: URLs need fsspec: pip install 'yolotui[mirror]' (plus s3fs, gcsfs "
                        "or adlfs for s3://, gs://, az://)") from None
    try:
        fsspec.get_filesystem_class(target.protocol)
    except ImportError as exc:
        raise UserError(f"--mirror {target}: {target.protocol}:// needs another package ({exc}); install it "
                        "on this machine") from None
    except ValueError:
        raise UserError(f"--mirror {target}: fsspec knows no protocol {target.protocol!r}") from None


def split_run(text: str, base: Path | None = None) -> tuple[Target, str]:
    """(target, run name) from `TARGET/RUN_NAME` as `yolotui restore` takes it; UserError when no name is given."""
    raw = str(text or "").strip().rstrip("/")
    target_text, _, name = raw.rpartition("/")
    if not name or not target_text or target_text.endswith(":/") or target_text.endswith("://"):
        if ":" in raw and "/" not in raw.partition(":")[2] and "://" not in raw:  # host:name
            host, _, name = raw.partition(":")
            return parse_target(f"{host}:", base), name
        raise UserError(f"{text}: give TARGET/RUN_NAME, the mirror target and the run's folder name "
                        "(e.g. s3://bucket/runs/exp)")
    if target_text.endswith(":") and "://" not in raw:  # host:/name -> host:/ and name
        target_text += "/"
    return parse_target(target_text, base), name
