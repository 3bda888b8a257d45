"""The configured hosts, kept in settings.yaml under `hosts`:

    hosts:
      gpu1:
        target: gpu1              # anything ssh understands: a ~/.ssh/config alias, user@host
        yolotui: ~/venv/bin/yolotui   # optional: how to run yolotui there (default: yolotui)

`local` is this machine and is never stored. No password or key is kept: ssh's own config, agent and keys
authenticate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from yolotui.errors import UserError

LOCAL = "local"
HOSTS_KEY = "hosts"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
DEFAULT_COMMAND = "yolotui"


@dataclass(frozen=True)
class Host:
    """One remote machine: its name here, the ssh target, and the command that runs yolotui there."""

    name: str
    target: str
    command: str = DEFAULT_COMMAND


def check_name(name: str) -> str:
    """`name` when it can name a host; UserError saying what a host name may hold otherwise."""
    if not NAME_RE.match(name or "") or name == LOCAL:
        raise UserError(f"host name {name!r}: use letters, digits, '.', '_' or '-' (up to 64, not starting "
                        f"with a dot or dash; '{LOCAL}' is this machine)")
    return name


def check_target(target: str) -> str:
    """`target` when ssh can take it as a destination; a target starting with '-' would be read as an option."""
    if not target or target.startswith("-") or any(c.isspace() or ord(c) < 32 for c in target):
        raise UserError(f"ssh target {target!r}: give a ~/.ssh/config alias or user@host (no spaces, not "
                        "starting with '-')")
    return target


def _from_entry(name: str, entry: Any) -> Host | None:
    if isinstance(entry, str):
        entry = {"target": entry}
    if not isinstance(entry, dict):
        return None
    target = entry.get("target", name)
    command = entry.get("yolotui", DEFAULT_COMMAND)
    if not isinstance(target, str) or not isinstance(command, str) or not command.strip():
        return None
    try:
        return Host(check_name(str(name)), check_target(target), command.strip())
    except UserError:
        return None


def load_hosts(strict: bool = False) -> list[Host]:
    """The configured hosts, by name; entries that are not a host are skipped (UserError when `strict`)."""
    from yolotui.usersettings import load_user_settings

    raw = load_user_settings(strict=strict).get(HOSTS_KEY) or {}
    if not isinstance(raw, dict):
        if strict:
            raise UserError("settings.yaml: hosts: expected a mapping of NAME: {target: ...}")
        return []
    hosts = []
    for name, entry in sorted(raw.items(), key=lambda item: str(item[0])):
        host = _from_entry(str(name), entry)
        if host is None and strict:
            raise UserError(f"settings.yaml: hosts: {name}: expected {{target: SSH_TARGET, yolotui: COMMAND}}")
        if host is not None:
            hosts.append(host)
    return hosts


def find_host(name: str) -> Host:
    """The host called `name`; UserError naming the configured ones when there is none."""
    for host in load_hosts():
        if host.name == name:
            return host
    known = ", ".join(h.name for h in load_hosts()) or "none yet"
    raise UserError(f"no host called {name!r} (configured: {known}); add it with `yolotui hosts add {name} "
                    "SSH_TARGET`")


def _write(hosts: dict[str, Any]) -> None:
    import yaml

    from yolotui.runs.atomic import atomic_write_text
    from yolotui.usersettings import load_user_settings, settings_file

    settings = load_user_settings(strict=True)
    if hosts:
        settings[HOSTS_KEY] = hosts
    else:
        settings.pop(HOSTS_KEY, None)
    path = settings_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, yaml.safe_dump(settings, sort_keys=True))
    except OSError as exc:
        raise UserError(f"{path}: cannot write ({exc.strerror or exc})") from exc


def _stored() -> dict[str, Any]:
    from yolotui.usersettings import load_user_settings

    raw = load_user_settings(strict=True).get(HOSTS_KEY) or {}
    return dict(raw) if isinstance(raw, dict) else {}


def add_host(name: str, target: str | None = None, command: str | None = None) -> Host:
    """Store host `name` (target defaults to the name: an ~/.ssh/config alias); replaces one of the same name."""
    host = Host(check_name(name), check_target(target or name), (command or DEFAULT_COMMAND).strip())
    if not host.command:
        raise UserError("--yolotui: give the command that runs yolotui on the host")
    stored = _stored()
    entry: dict[str, str] = {"target": host.target}
    if host.command != DEFAULT_COMMAND:
        entry["yolotui"] = host.command
    stored[name] = entry
    _write(stored)
    return host


def remove_host(name: str) -> None:
    """Forget host `name` (nothing on the host is touched); UserError when there is no such host."""
    stored = _stored()
    if name not in stored:
        find_host(name)  # raises, naming the configured hosts
    stored.pop(name, None)
    _write(stored)


def split_remote(value: str) -> tuple[Host | None, str]:
    """'HOST:RUN' with HOST a configured host -> (host, RUN); anything else is a local run -> (None, value)."""
    name, sep, rest = value.partition(":")
    if not sep or not rest or not NAME_RE.match(name):
        return None, value
    if name == LOCAL:
        return None, rest
    for host in load_hosts():
        if host.name == name:
            return host, rest
    return None, value
