"""The transport: the system OpenSSH client, one multiplexed connection per host, every call bounded in time.

Connections are shared through ControlMaster/ControlPersist; the control sockets live in a private folder
(mode 0700, owned by this user) so no other user can ride them. BatchMode=yes: ssh never prompts (a host that
would ask for a password reads as unreachable, naming why). ServerAlive probes end a dead link within seconds.
`YOLOTUI_SSH_CONFIG` names an ssh config file to use instead of ~/.ssh/config (tests, or a fleet-only file).

The remote command is the host's yolotui command followed by the arguments, each quoted with shlex.quote for
the remote shell: a run name holding spaces, quotes or ';' reaches the remote yolotui as one argument.
"""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from yolotui.fleet.hosts import Host

CONNECT_TIMEOUT_S = 8
QUERY_TIMEOUT_S = 20.0  # ls, version, gpu: a host slower than this reads as unreachable for this round
ACTION_TIMEOUT_S = 900.0  # stop (waits for a checkpoint), resume, train: bounded, but long
PERSIST_S = 120
SSH_LOST = 255  # ssh's own exit code: the connection failed or dropped
NOT_FOUND = 127  # the remote shell found no such command
MAX_BASE = 30  # a unix socket path holds ~107 bytes


@dataclass
class Reply:
    """What one remote call gave: exit code, stdout, stderr; `timed_out` when it ran past its bound."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def link_failed(self) -> bool:
        """True when ssh itself failed (no connection, link dropped, timed out), not the remote command."""
        return self.timed_out or self.returncode == SSH_LOST

    def reason(self) -> str:
        """One line saying why the call failed."""
        if self.timed_out:
            return "no answer in time"
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        return lines[-1][:200] if lines else f"exit code {self.returncode}"


def control_dir() -> Path:
    """The private folder of the control sockets (short path: a socket path is limited to ~100 bytes)."""
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    if len(base) > MAX_BASE:  # the socket's name (40) and ssh's temporary suffix (17) must still fit
        base = "/tmp"
    folder = Path(base) / f"yolotui-ssh-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = folder.lstat()
    except OSError:
        folder = Path(tempfile.mkdtemp(prefix="yolotui-ssh-"))
        return folder
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
        return Path(tempfile.mkdtemp(prefix="yolotui-ssh-"))  # someone else's, or open to others: not shared
    return folder


def ssh_options(connect_timeout: int = CONNECT_TIMEOUT_S) -> list[str]:
    """The options every call gives ssh (multiplexing, no prompts, bounded connect, live-link probes)."""
    options = []
    config = os.environ.get("YOLOTUI_SSH_CONFIG")
    if config:
        options += ["-F", config]
    for setting in ("BatchMode=yes", f"ConnectTimeout={connect_timeout}", "ControlMaster=auto",
                    f"ControlPath={control_dir() / '%C'}", f"ControlPersist={PERSIST_S}",
                    "ServerAliveInterval=5", "ServerAliveCountMax=3", "LogLevel=ERROR"):
        options += ["-o", setting]
    return options


def remote_line(host: Host, argv: list[str]) -> str:
    """The command line the remote shell runs: the host's yolotui command, then every argument quoted."""
    return " ".join([host.command, *(shlex.quote(str(a)) for a in argv)])


def attach_argv(name: str, theme: str | None = None, wizard: str | None = None) -> list[str]:
    """The remote side's `yolotui attach` arguments: a run's dashboard, or its `wizard` alone."""
    return ["attach", name] + (["--theme", theme] if theme else []) + (["--wizard", wizard] if wizard else [])


def ssh_argv(host: Host, argv: list[str], tty: bool = False) -> list[str]:
    """The local ssh command line that runs `yolotui ARGV` on `host` (`tty`: with a terminal, for a dashboard)."""
    return ["ssh", *ssh_options(), "-t" if tty else "-T", host.target, "--", remote_line(host, argv)]


def call(host: Host, argv: list[str], timeout: float = QUERY_TIMEOUT_S, stdin_text: str | None = None) -> Reply:
    """Run `yolotui ARGV` on `host` and wait at most `timeout` seconds (never a prompt, never forever)."""
    try:
        done = subprocess.run(ssh_argv(host, argv), capture_output=True, text=True, timeout=timeout,
                              input=stdin_text, stdin=None if stdin_text is not None else subprocess.DEVNULL,
                              errors="replace")
    except subprocess.TimeoutExpired as exc:
        return Reply(SSH_LOST, _text(exc.stdout), _text(exc.stderr), timed_out=True)
    except OSError as exc:
        return Reply(SSH_LOST, "", f"cannot run ssh: {exc.strerror or exc}")
    return Reply(done.returncode, done.stdout, done.stderr)


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else value.decode(errors="replace")


def close_master(host: Host, timeout: float = 5.0) -> None:
    """Ask the host's shared connection to exit (a later call opens a new one)."""
    try:
        subprocess.run(["ssh", *ssh_options(), "-O", "exit", host.target], capture_output=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    except (subprocess.TimeoutExpired, OSError):
        pass
