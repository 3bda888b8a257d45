"""A mirror at `host:path`, through rsync over ssh.

ssh is run as `$RSYNC_RSH` when set (rsync's own variable: `ssh -p 2222 -i ~/.ssh/mirror_key`), else as
`ssh -o BatchMode=yes -o ConnectTimeout=20`; host names, users, ports and keys usually live in ~/.ssh/config.
ssh never asks for a password here (BatchMode): a mirror runs unattended. rsync writes each file under a
temporary name and renames it into place, and keeps what a cut-short transfer had sent in `.rsync-partial/`
(one per file, reused by the next try, so a large checkpoint over a slow link is not sent from the start
again). The checkpoints' sha256 are checked on the remote host with `sha256sum` before their manifests are
renamed into place, in one ssh command.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from pathlib import Path

from yolotui.mirror.stores import MAX_SMALL_BYTES, Check, CopyError, Store
from yolotui.mirror.target import Target

DEFAULT_RSH = "ssh -o BatchMode=yes -o ConnectTimeout=20"
IO_TIMEOUT_S = 120  # rsync --timeout: no data for this long ends the transfer
COMMAND_TIMEOUT_S = 600.0  # any one rsync/ssh call; the supervisor's own timeout bounds the whole copy


class RsyncStore(Store):
    """TARGET/RUN_NAME on another host."""

    def __init__(self, target: Target, name: str) -> None:
        self.host = target.host
        base = target.remote_path
        self.path = (base.rstrip("/") + "/" if base else "") + name
        self.where = f"{self.host}:{self.path}"
        self.rsh = os.environ.get("RSYNC_RSH") or DEFAULT_RSH

    # -- the two programs -----------------------------------------------------------------------------------
    def _run(self, argv: list[str], what: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
        try:
            done = subprocess.run(argv, input=stdin, capture_output=True, timeout=COMMAND_TIMEOUT_S)
        except FileNotFoundError:
            raise CopyError(f"{self.where}: cannot {what}: {argv[0]} is not installed here") from None
        except subprocess.TimeoutExpired:
            raise CopyError(f"{self.where}: cannot {what}: no answer within {COMMAND_TIMEOUT_S:g} s") from None
        if done.returncode != 0:
            lines = [line for line in done.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
            reason = lines[-1].strip()[:300] if lines else f"exit code {done.returncode}"
            raise CopyError(f"{self.where}: cannot {what}: {reason}")
        return done

    def _ssh(self, command: str, what: str) -> subprocess.CompletedProcess:
        return self._run([*shlex.split(self.rsh), self.host, command], what)

    def _rsync(self, sources: str, destination: str, rels: list[str], what: str, missing_ok: bool = False) -> None:
        with tempfile.NamedTemporaryFile("w", prefix="yolotui-rsync-", suffix=".list") as listing:
            listing.write("".join(rel + "\n" for rel in rels))
            listing.flush()
            argv = ["rsync", "-rts", "--partial-dir=.rsync-partial", f"--timeout={IO_TIMEOUT_S}", "-e", self.rsh,
                    f"--files-from={listing.name}", *(["--ignore-missing-args"] if missing_ok else []),
                    sources, destination]
            self._run(argv, what)

    def _remote(self, rel: str = "") -> str:
        """The shell-quoted remote path of REL (the remote shell sees it once)."""
        return shlex.quote(f"{self.path}/{rel}" if rel else self.path)

    # -- the Store operations -------------------------------------------------------------------------------
    def prepare(self) -> None:
        """mkdir -p on the remote host."""
        self._ssh(f"mkdir -p {self._remote('weights')}", "create the mirror folder")

    def put(self, stage: Path, rels: list[str]) -> None:
        """One rsync for all of `rels`."""
        if rels:
            self._rsync(f"{Path(stage)}/", f"{self.host}:{self.path}/", rels, f"copy {', '.join(rels)}")

    def read_small(self, rel: str) -> bytes | None:
        """`head -c` of the remote file; None when it is absent."""
        try:
            done = self._ssh(f"test -f {self._remote(rel)} && head -c {MAX_SMALL_BYTES + 1} {self._remote(rel)}"
                             " || true", f"read {rel}")
        except CopyError:
            return None
        return done.stdout if done.stdout and len(done.stdout) <= MAX_SMALL_BYTES else None

    def sha256(self, rel: str) -> str | None:
        """`sha256sum` on the remote host."""
        done = self._ssh(f"test -f {self._remote(rel)} && sha256sum {self._remote(rel)} || true", f"hash {rel}")
        words = done.stdout.decode("ascii", "replace").split()
        return words[0] if words else None

    def rename(self, source_rel: str, target_rel: str) -> None:
        """mv -f on the remote host."""
        self._ssh(f"mv -f {self._remote(source_rel)} {self._remote(target_rel)}", f"rename {source_rel}")

    def commit(self, checks: list[Check]) -> None:
        """`sha256sum -c` of every checkpoint, then the renames, in one remote command."""
        if not checks:
            return
        lines = "".join(f"{c.sha256}  {self.path}/{c.rel}\n" for c in checks)
        moves = " && ".join(f"mv -f {self._remote(c.pending_rel)} {self._remote(c.final_rel)}" for c in checks)
        script = f"printf %s {shlex.quote(lines)} | sha256sum -c --status && {moves}"
        try:
            self._ssh(script, "check the copied checkpoints")
        except CopyError as exc:
            detail = str(exc).rpartition(": ")[2]
            raise CopyError(f"{self.where}: a copied checkpoint does not have its manifest's sha256 "
                            f"({detail or 'sha256sum -c failed'}); it will be copied again") from None

    def get(self, rels: list[str], into: Path) -> list[str]:
        """One rsync from the remote host; files it does not have are left out."""
        Path(into).mkdir(parents=True, exist_ok=True)
        self._rsync(f"{self.host}:{self.path}/", f"{Path(into)}/", rels, "fetch the mirrored run", missing_ok=True)
        return [rel for rel in rels if (Path(into) / rel).is_file()]
