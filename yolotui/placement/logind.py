"""Will a detached run survive logout? systemd-logind's KillUserProcesses, lingering, and user scopes.

With `KillUserProcesses=no` (most distributions' default) `setsid` is enough: the supervisor leaves
the SSH session's process group and outlives it. With `yes`, logind kills every process of the
session's scope at logout, `setsid` or not; the way out is to start the supervisor in its own scope
under the user's systemd manager (`systemd-run --user --scope`), and that manager itself only
outlives the last session when lingering is enabled (`loginctl enable-linger`).

`check_logind()` gathers the facts (commands run through an injectable runner, for tests) and
`LogindInfo.strategy` is what the launcher should do: 'setsid', 'systemd-run-scope', or 'at-risk'.
"""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

LOGIND_CONF_FILES = ("/usr/lib/systemd/logind.conf", "/etc/systemd/logind.conf")
LOGIND_CONF_DIRS = ("/usr/lib/systemd/logind.conf.d", "/usr/local/lib/systemd/logind.conf.d",
                    "/run/systemd/logind.conf.d", "/etc/systemd/logind.conf.d")
LINGER_DIR = "/var/lib/systemd/linger"

SETSID = "setsid"
SCOPE = "systemd-run-scope"
AT_RISK = "at-risk"

Runner = Callable[[Sequence[str]], "tuple[int, str]"]


@dataclass
class LogindInfo:
    """The facts and the decision: None where a fact could not be established."""

    kill_user_processes: bool | None
    kill_source: str  # where the setting was read: 'loginctl', a conf file, or 'unknown'
    linger: bool | None
    scope_usable: bool | None
    scope_error: str | None
    user: str
    strategy: str  # 'setsid' | 'systemd-run-scope' | 'at-risk'
    advice: str
    has_systemd: bool = True

    @property
    def needs_scope(self) -> bool:
        """True when the launcher must wrap the supervisor in `systemd-run --user --scope`."""
        return self.strategy == SCOPE

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form."""
        return asdict(self)


def _run(argv: Sequence[str]) -> tuple[int, str]:
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def _parse_bool(text: str) -> bool | None:
    value = text.strip().lower()
    if value in ("yes", "true", "1", "on"):
        return True
    if value in ("no", "false", "0", "off"):
        return False
    return None


def _properties(output: str) -> dict[str, str]:
    props = {}
    for line in output.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    return props


def kill_user_processes_from_conf(files: Sequence[str] = LOGIND_CONF_FILES,
                                  dirs: Sequence[str] = LOGIND_CONF_DIRS) -> tuple[bool | None, str]:
    """KillUserProcesses as logind.conf and its drop-ins set it (later files win), and which file said so."""
    paths = [Path(f) for f in files]
    for folder in dirs:
        try:
            paths += sorted(Path(folder).glob("*.conf"))
        except OSError:
            continue
    value: bool | None = None
    source = "unknown"
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        section = ""
        for raw in text.splitlines():
            line = raw.strip()
            if line.startswith("[") and line.endswith("]"):
                section = line[1:-1]
            elif section == "Login" and line.startswith("KillUserProcesses="):
                parsed = _parse_bool(line.split("=", 1)[1])
                if parsed is not None:
                    value, source = parsed, str(path)
    return value, source


def check_logind(user: str | None = None, runner: Runner | None = None, linger_dir: str = LINGER_DIR,
                 conf_files: Sequence[str] = LOGIND_CONF_FILES, conf_dirs: Sequence[str] = LOGIND_CONF_DIRS,
                 probe_scope: bool = True) -> LogindInfo:
    """Gather KillUserProcesses, lingering and scope usability for `user`, and decide the launch strategy."""
    run = runner or _run
    user = user or _current_user()
    has_systemd = runner is not None or bool(shutil.which("loginctl"))
    kill: bool | None = None
    source = "unknown"
    linger: bool | None = None
    if has_systemd:
        code, out = run(["loginctl", "show-session", "--property=KillUserProcesses"])
        if code == 0:
            kill = _parse_bool(_properties(out).get("KillUserProcesses", ""))
            source = "loginctl" if kill is not None else source
        code, out = run(["loginctl", "show-user", user, "--property=Linger"])
        if code == 0:
            linger = _parse_bool(_properties(out).get("Linger", ""))
    if kill is None:
        kill, source = kill_user_processes_from_conf(conf_files, conf_dirs)
    if linger is None:
        linger_file = Path(linger_dir) / user
        linger = True if linger_file.exists() else (False if Path(linger_dir).is_dir() else None)
    scope_usable: bool | None = None
    scope_error: str | None = None
    if probe_scope and (runner is not None or shutil.which("systemd-run")):
        code, out = run(["systemd-run", "--user", "--scope", "--quiet", "--", "true"])
        scope_usable = code == 0
        scope_error = None if scope_usable else (out.splitlines()[-1] if out else f"exit {code}")
    elif probe_scope:
        scope_usable, scope_error = False, "systemd-run not found"
    strategy, advice = decide(kill, linger, scope_usable, user)
    return LogindInfo(kill, source, linger, scope_usable, scope_error, user, strategy, advice, has_systemd)


def decide(kill: bool | None, linger: bool | None, scope_usable: bool | None, user: str) -> tuple[str, str]:
    """The launch strategy and the advice text for these facts."""
    if kill is False:
        return SETSID, "logind keeps processes at logout (KillUserProcesses=no): detached runs survive logout."
    if kill is None:
        if scope_usable and linger:
            return SCOPE, ("KillUserProcesses is unknown; runs start in a systemd user scope (lingering is on) "
                           "so they survive logout either way.")
        return SETSID, ("KillUserProcesses could not be read (no systemd-logind?): runs are detached with setsid, "
                        "which survives logout unless logind is set to kill user processes.")
    if scope_usable and linger:
        return SCOPE, ("logind kills your processes at logout (KillUserProcesses=yes): yolotui starts runs with "
                       "`systemd-run --user --scope`, and lingering is on, so they survive logout.")
    if scope_usable:
        return AT_RISK, ("logind kills your processes at logout (KillUserProcesses=yes) and lingering is off: "
                         f"run `loginctl enable-linger {user}` (an administrator may need to) so runs started "
                         "in a user scope survive logout; until then keep the SSH session open.")
    return AT_RISK, ("logind kills your processes at logout (KillUserProcesses=yes) and `systemd-run --user "
                     "--scope` is not usable here: ask an administrator to enable lingering for you "
                     f"(`loginctl enable-linger {user}`) or to set KillUserProcesses=no in /etc/systemd/logind.conf; "
                     "until then keep the SSH session open.")


def _current_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())
