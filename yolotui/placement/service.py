"""Surviving a reboot or a container restart: resume interrupted runs, and the systemd user unit that does it.

An *interrupted* run is one whose status.json says it is live (queued, running, restarting, stopping) while
no supervisor holds its lock: the machine rebooted, the container restarted, or the supervisor was killed.
`resume_interrupted()` relaunches every such run in the user's index with a new supervisor: the same
run.yaml (restart policy, environment, backend), run.yaml's command with the remedies' changes re-applied (a
halved batch, a lower learning rate, NCCL variables: only known flags and variables, values checked; never a
command string from status.json) and the environment changes of its remedies. The
trainer continues from weights/last.pt; a command with `resume_args` in run.yaml gets them at once. A queued
run that never started is queued again, waiting for the same conditions (yolotui.placement.queue). Runs that
ended `interrupted` with class `preempted` (the machine went away; yolotui/supervisor/spot.py) come first.

`unit_text()` / `install_unit()` write ~/.config/systemd/user/yolotui-resume.service, a oneshot unit that runs
`yolotui resume --interrupted` when the user's systemd manager starts (at boot with lingering on).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yolotui.errors import UserError
from yolotui.runs import index
from yolotui.runs.layout import INTERRUPTED
from yolotui.runs.runconfig import RESERVED_KEYS, read_run_config, restart_settings, set_flag
from yolotui.runs.status import effective_state, read_status, slurm_job_of

UNIT_NAME = "yolotui-resume.service"


@dataclass
class ResumeResult:
    """What happened to one interrupted run."""

    run_dir: str
    name: str
    resumed: bool
    message: str


def interrupted_runs() -> list[Path]:
    """Run folders in the user's index whose status says live while no supervisor holds the lock.

    SLURM runs are left out: SLURM requeues what it preempts or loses with a node, and a SLURM run ended from
    outside is resubmitted by `yolotui resume`, never restarted on this (login) machine at boot.
    """
    found = []
    for entry in index.entries():
        run_dir = Path(entry.path)
        if not (run_dir / "status.json").exists():
            continue
        status = read_status(run_dir)
        if slurm_job_of(status):
            continue
        if effective_state(run_dir, status) == INTERRUPTED:
            found.append(run_dir)
    return found


# What a remedy may change (yolotui/supervisor/remedies.py), and the shape of the value.
REMEDY_FLAGS = {"--batch-size": int, "--batch": int, "--accumulate": int, "--lr-scale": float,
                "--yolotui-batch": int}  # the ultralytics shim's batch (yolotui/backends/ultralytics/remedies.py)
REMEDY_ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "PYTORCH_CUDA_ALLOC_CONF", "TORCH_DISTRIBUTED_", "YOLOTUI_DDP_")


def trusted_changes(remedies: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The remedies' accumulated changes, keeping only known flags with numeric values and known variables."""
    import math
    import re

    args: dict[str, Any] = {}
    env: dict[str, str] = {}
    for remedy in remedies:
        changes = remedy.get("changes") if isinstance(remedy, dict) else None
        if not isinstance(changes, dict):
            continue
        for flag, value in (changes.get("args") or {}).items() if isinstance(changes.get("args"), dict) else ():
            kind = REMEDY_FLAGS.get(flag)
            if kind is None or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if kind is int and float(value).is_integer() and value >= 1:
                args[flag] = int(value)
            elif kind is float and math.isfinite(value) and value > 0:
                args[flag] = float(value)
        for key, value in (changes.get("env") or {}).items() if isinstance(changes.get("env"), dict) else ():
            if isinstance(key, str) and key.startswith(REMEDY_ENV_PREFIXES) and \
                    re.fullmatch(r"[A-Za-z0-9_.:,=-]{0,200}", str(value)):
                env[key] = str(value)
    return {"args": args, "env": env}


def relaunch_plan(run_dir: Path, trusted: bool = False) -> dict[str, Any]:
    """The launch() arguments that continue an interrupted run (see the module docstring); UserError for a
    run.yaml this user's yolotui did not write, unless the caller says the user `trusted` it."""
    run_dir = Path(run_dir)
    config = read_run_config(run_dir)
    from yolotui.runs.runconfig import untrusted_fields

    found = {} if trusted else untrusted_fields(config)
    if found:  # restored, copied in or edited: never run unattended (yolotui resume asks, or takes --trust)
        raise UserError(f"{run_dir}/run.yaml: {', '.join(found)} not written by yolotui on this machine; check them "
                        f"and resume with `yolotui resume {run_dir} --trust`")
    status = read_status(run_dir)
    resume_args = [str(a) for a in config.get("resume_args") or []]
    command = [str(a) for a in config["command"]]
    env = {str(k): str(v) for k, v in (config.get("env") or {}).items()}
    previous: dict[str, Any] = {"state": status.state if status else None, "attempt": status.attempt if status else 0}
    if status is not None:
        # Never run a string from status.json: the command is run.yaml's, with only the
        # remedies' known flags and variables re-applied, each value checked.
        changes = trusted_changes(status.remedies or [])
        for flag, value in changes["args"].items():
            command = set_flag(command, flag, value)
        env.update(changes["env"])
    max_attempts, backoff_s, _ = restart_settings(config)
    restart = {k: v for k, v in (config.get("restart") or {}).items() if k not in ("max_attempts", "backoff_s")}
    extra = {k: v for k, v in config.items() if k not in RESERVED_KEYS and k != "logout"}
    # A queued run that never started waits again (from its first attempt); one that started does not.
    never_started = status is None or not status.attempts
    extra["resume_first"] = bool(resume_args) and not never_started
    extra["resumed_after_interrupt"] = {"at": time.time(), "previous_state": previous["state"],
                                        "previous_attempt": previous["attempt"]}
    return {"command": command, "name": index.name_for(run_dir),
            "backend": str(config.get("backend") or "exec"), "device": config.get("device"),
            "max_attempts": max_attempts, "env": env, "extra": extra, "backoff_s": backoff_s,
            "cwd": Path(config["cwd"]) if config.get("cwd") else None, "restart": restart,
            "queue": config.get("queue") if never_started else None}


def relaunch(run_dir: Path, trusted: bool = False) -> None:
    """Start a new supervisor for an interrupted run (UserError when it cannot be, e.g. it is live again, or
    its run.yaml is not this user's yolotui's and not `trusted`)."""
    from yolotui.placement.launcher import launch

    launch(Path(run_dir), **relaunch_plan(run_dir, trusted))


def preempted_first(run_dirs: list[Path]) -> list[Path]:
    """`run_dirs` with the preempted runs (class `preempted`: checkpointed for a machine that went away) first,
    each group in its own order."""
    def preempted(run_dir: Path) -> bool:
        status = read_status(run_dir)
        return status is not None and status.failure_class == "preempted"

    marks = [preempted(run_dir) for run_dir in run_dirs]
    return [d for d, m in zip(run_dirs, marks) if m] + [d for d, m in zip(run_dirs, marks) if not m]


def resume_interrupted() -> list[ResumeResult]:
    """Relaunch every interrupted run of the user; one result per run, preempted runs first, else in index
    order."""
    results = []
    from yolotui.placement.ownership import refuse_foreign

    for run_dir in preempted_first(interrupted_runs()):
        name = index.name_for(run_dir)
        try:
            refuse_foreign(run_dir)  # at boot nobody is asked: another user's folder is never resumed
            relaunch(run_dir)
        except (UserError, OSError, ValueError) as exc:
            results.append(ResumeResult(str(run_dir), name, False, str(exc)))
            continue
        results.append(ResumeResult(str(run_dir), name, True, f"resumed {name} ({run_dir})"))
    return results


# ------------------------------------------------------------------------------------------ systemd unit

def user_unit_dir() -> Path:
    """~/.config/systemd/user (or $XDG_CONFIG_HOME/systemd/user)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "systemd" / "user"


def unit_path() -> Path:
    """Where the resume unit is written."""
    return user_unit_dir() / UNIT_NAME


def _quote(word: str) -> str:
    """A systemd command-line word: quoted when it holds spaces or quotes, with % and \\ escaped."""
    escaped = word.replace("\\", "\\\\").replace("%", "%%")
    if any(c in escaped for c in " \t\"'"):
        return '"' + escaped.replace('"', '\\"') + '"'
    return escaped


def resume_command(python: str | None = None) -> list[str]:
    """The command the unit runs: this Python, `-m yolotui resume --interrupted`."""
    return [python or sys.executable, "-m", "yolotui", "resume", "--interrupted"]


def unit_text(python: str | None = None, package_root: Path | None = None,
              environment: dict[str, str] | None = None) -> str:
    """The text of yolotui-resume.service.

    PYTHONPATH names the folder holding this yolotui package (so an uninstalled checkout works) and
    YOLOTUI_HOME is kept when set, so the unit sees the same run index as the user.
    """
    if package_root is None:
        from yolotui.placement.launcher import package_root as _root

        package_root = _root()
    env = {"PYTHONPATH": str(package_root)}
    home = os.environ.get("YOLOTUI_HOME")
    if home:
        env["YOLOTUI_HOME"] = home
    env.update(environment or {})
    lines = [
        "# Written by `yolotui service install`: resumes interrupted yolotui runs when your systemd user",
        "# manager starts (at boot when lingering is on: loginctl enable-linger $USER).",
        "[Unit]",
        "Description=Resume interrupted yolotui training runs",
        # no After=default.target: default.target is ordered after what it wants, that would be a cycle
        "",
        "[Service]",
        "Type=oneshot",
        # The supervisors it starts are detached and must outlive this oneshot's main process.
        "RemainAfterExit=yes",
        "KillMode=process",
        *[f"Environment={_quote(f'{k}={v}')}" for k, v in env.items()],
        "WorkingDirectory=%h",
        "ExecStart=" + " ".join(_quote(w) for w in resume_command(python)),
        "",
        "[Install]",
        "WantedBy=default.target",
        "",
    ]
    return "\n".join(lines)


def install_unit(dry_run: bool = False, python: str | None = None) -> tuple[Path, str, bool]:
    """Write the unit (unless `dry_run`); returns (path, text, written)."""
    path = unit_path()
    text = unit_text(python)
    if dry_run:
        return path, text, False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        from yolotui.runs.atomic import atomic_write_text

        atomic_write_text(path, text)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror}; check the folder's permissions or use --dry-run "
                        "and write it yourself") from exc
    return path, text, True


def enable_instructions(user: str | None = None) -> list[str]:
    """The commands that enable the unit, and lingering so it runs at boot before anyone logs in."""
    user = user or os.environ.get("USER") or "$USER"
    return [
        "systemctl --user daemon-reload",
        f"systemctl --user enable {UNIT_NAME}",
        f"loginctl enable-linger {user}    # so it runs at boot, before you log in",
    ]


DOCKER_ADVICE = (
    "In a container there is no systemd: start the container with `docker run --restart unless-stopped ...` "
    "(or `restart: unless-stopped` in compose) and make its command run `yolotui resume --interrupted` "
    "first, then keep PID 1 alive (e.g. `sh -c 'yolotui resume --interrupted; exec sleep infinity'`); keep "
    "the run folders and the yolotui state folder (YOLOTUI_HOME) on a volume so they outlive the container."
)
