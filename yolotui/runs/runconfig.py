"""run.yaml: what the supervisor runs (command, backend, restart policy, env additions, extra options), and its
seal (below: whether this user's yolotui wrote its command, env and logging config).

Written once by the launcher, read by the supervisor at start and by control (e.g. whether the command
handles SIGUSR1). Keys: name, backend, command (argv list), cwd, device, env (mapping), restart
(max_attempts, backoff_s, backoff_max_s), resume_args (argv appended on retries, optional), save_signal
(bool: the command writes a checkpoint on SIGUSR1), created, plus any extra options a backend adds.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

from yolotui.errors import UserError
from yolotui.runs.atomic import atomic_write_text
from yolotui.runs.layout import RUN_YAML

# Keys the job layer itself owns; extra options may not reuse them.
RESERVED_KEYS = frozenset({"name", "backend", "command", "cwd", "device", "env", "restart", "created", "queue"})

MAX_RUN_YAML_BYTES = 4 * 2**20  # a run.yaml is a few kB; anything near this is not one

# run.yaml's `restart` defaults: the wait before a retry doubles from backoff_s up to backoff_max_s.
DEFAULT_BACKOFF_S = 2.0
DEFAULT_BACKOFF_MAX_S = 60.0

# Backends whose trainer writes a checkpoint on SIGUSR1 (for any other, run.yaml must say save_signal: true).
SAVE_SIGNAL_BACKENDS = frozenset({"yolotui"})


def run_yaml_path(run_dir: Path) -> Path:
    """Where a run's run.yaml lives."""
    return Path(run_dir) / RUN_YAML


def write_run_config(run_dir: Path, config: dict[str, Any], trusted: bool = True) -> None:
    """Atomically write run.yaml, sealed as this user's (the seal in yolotui.runs.runconfig) unless `trusted` is False
    (a restored folder's command is the mirror's, not ours)."""
    import yaml

    config = sealed(config, trusted)
    text = yaml.safe_dump(config, sort_keys=False, default_flow_style=False, allow_unicode=True)
    atomic_write_text(run_yaml_path(run_dir), text)


def read_run_config(run_dir: Path) -> dict[str, Any]:
    """Parse run.yaml (the one bounded YAML reader); UserError naming the file, the line and what to do when it
    is missing, unreadable, too large, not YAML, not a mapping or without a command."""
    from yolotui import safe_yaml

    path = run_yaml_path(run_dir)
    data = safe_yaml.load_mapping(path, "run.yaml", MAX_RUN_YAML_BYTES)
    command = data.get("command")
    if not isinstance(command, list) or not command:
        raise UserError(f"{path}: field 'command' must be a non-empty list of arguments")
    return data


def handles_save_signal(config: dict[str, Any]) -> bool:
    """True when the run's command writes a checkpoint on SIGUSR1 (instead of dying of it)."""
    if "save_signal" in config:
        return bool(config["save_signal"])
    return config.get("backend") in SAVE_SIGNAL_BACKENDS


def run_yaml_field(run_dir: Path, key: str) -> Any:
    """One field of run.yaml, None when the file is missing, unreadable or not a mapping (the lenient reader
    for what is shown or planned; read_run_config is the strict one the supervisor uses)."""
    import yaml

    from yolotui import safe_yaml

    path = run_yaml_path(run_dir)
    try:
        if path.stat().st_size > MAX_RUN_YAML_BYTES:
            return None
        data = safe_yaml.load_file(path)  # bounded aliases too
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError):
        return None
    return data.get(key) if isinstance(data, dict) else None


def read_backend(run_dir: Path, default: str = "yolotui") -> str:
    """run.yaml's `backend` (the backend a resume must use); `default` when the file or field is missing."""
    backend = run_yaml_field(run_dir, "backend")
    return str(backend) if isinstance(backend, str) and backend else default

def restart_settings(run_config: dict[str, Any]) -> tuple[int, float, float]:
    """(max_attempts, backoff_s, backoff_max_s) from run.yaml's `restart` mapping, with defaults."""
    restart = run_config.get("restart") or {}
    max_attempts = max(1, int(restart.get("max_attempts", 1)))
    backoff = max(0.0, float(restart.get("backoff_s", DEFAULT_BACKOFF_S)))
    backoff_max = max(backoff, float(restart.get("backoff_max_s", DEFAULT_BACKOFF_MAX_S)))
    return max_attempts, backoff, backoff_max


def set_flag(argv: list[str], flag: str, value: Any) -> list[str]:
    """`argv` with `flag` set to `value`: replaces `--flag v` or `--flag=v`, else appends `--flag value`.

    A value of None removes the flag (and its value); True appends a bare flag.
    """
    out: list[str] = []
    i = 0
    found = False
    while i < len(argv):
        token = argv[i]
        if token == flag or token.startswith(flag + "="):
            found = True
            takes_value = token == flag and i + 1 < len(argv) and not argv[i + 1].startswith("--")
            i += 2 if takes_value else 1
            if value is None:
                continue
            out.extend([flag] if value is True else [flag, str(value)])
            continue
        out.append(token)
        i += 1
    if not found and value is not None:
        out.extend([flag] if value is True else [flag, str(value)])
    return out


# ------------------------------------------------------------------------------------------------ the seal
# A run folder is input: restored from a mirror, copied in, or edited by hand, its run.yaml may name any command.
# Every time yolotui writes run.yaml it seals what would run (`command`, `env`, `logging`) with an HMAC under a
# per-user secret key (`trust.key`, 0600, in yolotui's config folder) and stores it as run.yaml's `trust`. A
# relaunch that runs those fields as stored (yolotui.jobs.resume) first checks the seal: a missing or wrong one
# means someone else wrote them; they are shown and need a `y` on a terminal, or `--trust`, before they run.

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


def describe_untrusted(run_dir: Path, fields: dict[str, Any]) -> str:
    """What the user is asked to trust, one line per field."""
    lines = [f"{Path(run_dir).name}/run.yaml was not written by yolotui on this machine (restored, copied or "
             "edited); it would run:"]
    for name, value in fields.items():
        shown = " ".join(str(a) for a in value) if name == "command" and isinstance(value, list) else value
        lines.append(f"  {name}: {shown}")
    return "\n".join(lines)
