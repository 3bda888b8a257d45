"""Surviving logout: decide at launch how the supervisor is started, and say which way applied.

`setsid` (the launcher's new session) survives an SSH drop and a logout wherever systemd-logind keeps user
processes (KillUserProcesses=no, the usual default). Where logind kills them, the supervisor is started inside
its own transient scope of the user's systemd manager (`systemd-run --user --scope`), which logind's cleanup
of the login session does not touch; that manager itself outlives the last login only with lingering on, so
when lingering is off the launch warns with the exact `loginctl enable-linger USER` command. Where no scope
can be made, the launch warns the same way.

`guard_supervisor(argv, name)` returns the argv to start and a record kept in run.yaml under `logout`
(shown by `yolotui doctor` and printed by the launching command).
"""

from __future__ import annotations

import re
import time
from typing import Any

SETSID = "setsid"
SCOPE = "systemd-run-scope"
CHECK_TTL_S = 300.0  # logind settings rarely change: one check serves a TUI's launches for a while

_cached: tuple[float, Any] | None = None


def linger_command(user: str) -> str:
    """The exact command that turns lingering on for `user`."""
    return f"loginctl enable-linger {user}"


def scope_argv(argv: list[str], name: str) -> list[str]:
    """`argv` started in a new transient user scope named after the run."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:60] or "run"
    unit = f"yolotui-{safe}-{int(time.time() * 1000) % 10**9}"
    return ["systemd-run", "--user", "--scope", "--quiet", "--collect", f"--unit={unit}",
            f"--description=yolotui supervisor of {name}", "--", *argv]


def plan(info: Any) -> dict[str, Any]:
    """The record for a LogindInfo: applied (setsid | systemd-run-scope), note, warning (or None), facts."""
    kill = info.kill_user_processes
    wrap = bool(info.scope_usable) and (kill is True or info.strategy == SCOPE)
    warning = None
    if wrap:
        note = "started in its own systemd user scope (systemd-run --user --scope): logind's logout cleanup "
        note += "does not reach it" if info.linger else "does not reach it while your systemd user manager runs"
        if kill is True and not info.linger:
            warning = (f"logind kills your processes at logout and lingering is off: run `{linger_command(info.user)}` "
                       "(an administrator may need to) so this run survives your last logout; until then keep a "
                       "session open")
    elif kill is True:
        note = "detached with setsid only: `systemd-run --user --scope` is not usable here" + (
            f" ({info.scope_error})" if info.scope_error else "")
        if info.linger:
            note += "; lingering is on"
        warning = (f"logind kills your processes at logout (KillUserProcesses=yes): this run dies when you log "
                   f"out; run `{linger_command(info.user)}` or ask an administrator to set KillUserProcesses=no, "
                   "and keep this session open until then")
    elif kill is False:
        note = "detached with setsid: logind keeps processes at logout (KillUserProcesses=no)"
    else:
        note = "detached with setsid: logind's KillUserProcesses could not be read; it survives logout unless " \
               "logind is set to kill user processes"
    return {"applied": SCOPE if wrap else SETSID, "note": note, "warning": warning, "strategy": info.strategy,
            "kill_user_processes": kill, "linger": info.linger, "scope_usable": info.scope_usable,
            "user": info.user}


def guard_supervisor(argv: list[str], name: str, info: Any = None) -> tuple[list[str], dict[str, Any]]:
    """The supervisor argv to start (wrapped in a user scope where logind would kill it) and the record."""
    if info is None:
        info = current_logind()
    record = plan(info)
    return (scope_argv(argv, name) if record["applied"] == SCOPE else list(argv)), record


def current_logind() -> Any:
    """check_logind()'s answer, cached for CHECK_TTL_S in this process (it runs loginctl and systemd-run)."""
    global _cached
    now = time.monotonic()
    if _cached is None or now - _cached[0] > CHECK_TTL_S:
        from yolotui.placement.logind import check_logind

        _cached = (now, check_logind())
    return _cached[1]


def launch_lines_for(run_dir: Any) -> list[str]:
    """launch_lines of the run's run.yaml `logout` record; [] when run.yaml is absent or unreadable."""
    from yolotui.runs.runconfig import run_yaml_field

    record = run_yaml_field(run_dir, "logout")
    return launch_lines(record if isinstance(record, dict) else None)


def launch_lines(record: dict[str, Any] | None) -> list[str]:
    """The lines a launching command prints about logout (note, and the warning when there is one)."""
    if not record:
        return []
    lines = [f"logout: {record.get('note')}"]
    if record.get("warning"):
        lines.append(f"warning: {record['warning']}")
    return lines
