"""Two "hosts" on one real sshd for the fleet tests: ssh config aliases `hosta` and `hostb` (both 127.0.0.1 on
sshd's port), each running this checkout's yolotui with its own YOLOTUI_HOME, plus a local YOLOTUI_HOME (the
laptop) whose settings.yaml lists both. `dead` is a third alias on a port where nothing listens.

`fleet_env(tmp)` returns a Fleet whose `env` runs the local yolotui (YOLOTUI_HOME, YOLOTUI_SSH_CONFIG set).
"""

from __future__ import annotations

import os
import shlex
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from sshkit import Sshd, start_sshd

REPO_ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Fleet:
    """The sshd, the ssh config, the local environment and each host's YOLOTUI_HOME."""

    sshd: Sshd
    ssh_config: Path
    env: dict[str, str]
    homes: dict[str, Path]

    def stop(self) -> None:
        """End sshd and the connections it serves (so the tests' shared ssh connections end with it)."""
        import psutil

        try:
            sessions = psutil.Process(self.sshd.process.pid).children(recursive=True)
        except psutil.Error:
            sessions = []
        for session in sessions:
            try:
                session.kill()
            except psutil.Error:
                pass
        self.sshd.stop()


def _dead_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed again at once: nothing listens there


def remote_command(home: Path, extra_env: dict[str, str] | None = None) -> str:
    """How a test host runs yolotui: this checkout, this Python, its own YOLOTUI_HOME."""
    env = {"YOLOTUI_HOME": str(home), "PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1", **(extra_env or {})}
    return "env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + f" {shlex.quote(sys.executable)} -m yolotui"


def start_fleet(tmp: Path, extra_env: dict[str, str] | None = None) -> Fleet:
    """sshd, the aliases, the homes and the local settings.yaml (see the module docstring)."""
    import yaml

    sshd = start_sshd(tmp / "sshd", ("openssh-server",), why="the fleet tests (a private sshd as two hosts)")
    folder = tmp / "sshd"
    key = folder / "client_key"
    blocks = []
    for alias, port in (("hosta", sshd.port), ("hostb", sshd.port), ("dead", _dead_port())):
        blocks.append(f"Host {alias}\n  HostName 127.0.0.1\n  Port {port}\n  User root\n  IdentityFile {key}\n"
                      f"  IdentitiesOnly yes\n  UserKnownHostsFile {folder / 'known_hosts'}\n"
                      "  StrictHostKeyChecking accept-new\n")
    config = folder / "ssh_config"
    config.write_text("\n".join(blocks))
    os.chmod(config, 0o600)
    homes = {name: tmp / f"home-{name}" for name in ("local", "hosta", "hostb", "dead")}
    hosts = {name: {"target": name, "yolotui": remote_command(homes[name], extra_env)}
             for name in ("hosta", "hostb")}
    settings = homes["local"] / "config" / "settings.yaml"
    settings.parent.mkdir(parents=True)
    settings.write_text(yaml.safe_dump({"hosts": hosts}))
    env = dict(os.environ)
    env.update(YOLOTUI_HOME=str(homes["local"]), YOLOTUI_SSH_CONFIG=str(config), PYTHONUNBUFFERED="1",
               PYTHONPATH=str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
               XDG_RUNTIME_DIR=str(tmp / "run"))
    (tmp / "run").mkdir(mode=0o700)
    return Fleet(sshd, config, env, homes)
