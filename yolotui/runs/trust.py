"""Whether a run folder's own command, env and logging config were written by this user's yolotui.

A run folder is input: restored from a mirror, copied in, or edited by hand, its run.yaml may name any command.
Every time yolotui writes run.yaml it seals what would run (`command`, `env`, `logging`) with an HMAC under a
per-user secret key (`trust.key`, 0600, in yolotui's config folder) and stores it as run.yaml's `trust`. A
relaunch that runs those fields as stored (yolotui.jobs.resume) first checks the seal: a missing or wrong one
means someone else wrote them, and they are shown and need a `y` on a terminal, or `--trust`, before they run.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

SEAL_KEY = "trust"                     # run.yaml's field holding the seal
SEALED = ("command", "env", "logging")  # what a relaunch may run as the folder holds it
KEY_FILE = "trust.key"


def _key_path() -> Path:
    from yolotui.runs.index import config_dir

    return config_dir() / KEY_FILE


def _read_key(create: bool) -> bytes | None:
    """The per-user secret (made on first use when `create`), or None when there is none or it is unreadable."""
    path = _key_path()
    try:
        with open(path, "rb") as handle:
            key = handle.read(256)
        return key if len(key) >= 32 else None
    except FileNotFoundError:
        if not create:
            return None
    except OSError:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first: use theirs
        return _read_key(create=False)
    with os.fdopen(fd, "wb") as handle:
        handle.write(key)
    return key


def _payload(config: dict[str, Any]) -> bytes:
    return json.dumps({name: config.get(name) for name in SEALED}, sort_keys=True, default=str).encode()


def seal(config: dict[str, Any]) -> str | None:
    """The seal of `config`'s command, env and logging under this user's key (None when no key can be kept)."""
    key = _read_key(create=True)
    return hmac.new(key, _payload(config), hashlib.sha256).hexdigest() if key else None


def sealed(config: dict[str, Any], trusted: bool) -> dict[str, Any]:
    """`config` with a fresh seal when `trusted`, without any seal otherwise."""
    out = {k: v for k, v in config.items() if k != SEAL_KEY}
    stamp = seal(out) if trusted else None
    return {**out, SEAL_KEY: stamp} if stamp else out


def is_trusted(config: dict[str, Any]) -> bool:
    """True when `config`'s seal is this user's over its command, env and logging."""
    stored = config.get(SEAL_KEY)
    key = _read_key(create=False)
    if not isinstance(stored, str) or key is None:
        return False
    return hmac.compare_digest(stored, hmac.new(key, _payload(config), hashlib.sha256).hexdigest())


def untrusted_fields(config: dict[str, Any], fields: tuple[str, ...] = SEALED) -> dict[str, Any]:
    """The fields among `fields` that would run as the folder holds them without this user's seal ({} when
    sealed, or when none of them is set)."""
    if is_trusted(config):
        return {}
    return {name: config[name] for name in fields if name in SEALED and config.get(name)}


def describe(run_dir: Path, fields: dict[str, Any]) -> str:
    """What the user is asked to trust, one line per field."""
    lines = [f"{Path(run_dir).name}/run.yaml was not written by yolotui on this machine (restored, copied or "
             "edited); it would run:"]
    for name, value in fields.items():
        shown = " ".join(str(a) for a in value) if name == "command" and isinstance(value, list) else value
        lines.append(f"  {name}: {shown}")
    return "\n".join(lines)
