"""A real sshd on 127.0.0.1 for the rsync-over-ssh mirror tests: its own host key, config and authorized key.

`start_sshd(folder)` runs `/usr/sbin/sshd -D -e -p PORT -f CONFIG` as root with everything in `folder` and
returns an Sshd whose `rsh` is the ssh command line (port, key, known_hosts) to export as RSYNC_RSH. Without the
Debian packages openssh-server and rsync, or not as root, the caller's test is skipped with the install command
(tests/syspkg.py; under CI=true, where .ci/run installs them, it fails instead); an sshd that exits or never
accepts a login fails the test with its log.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from syspkg import require

SSHD = "/usr/sbin/sshd"


@dataclass
class Sshd:
    """A running sshd: its process, port, the ssh command line for RSYNC_RSH, and the login to use."""

    process: subprocess.Popen
    port: int
    rsh: str
    login: str = "root@127.0.0.1"

    def stop(self) -> None:
        """End sshd (and wait for it)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True, timeout=60,
                   capture_output=True)


def start_sshd(folder: Path, packages: tuple[str, ...] = ("openssh-server", "rsync"),
               why: str = "the rsync-over-ssh mirror tests (a private sshd)") -> Sshd:
    """Start sshd for the tests (see the module docstring); pytest.fail saying why it did not start. `packages`
    and `why`: what the calling tests need besides sshd, and what they are, for the skip's message."""
    require(*packages, root=True, why=why)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    host_key, client_key = folder / "host_key", folder / "client_key"
    _keygen(host_key)
    _keygen(client_key)
    authorized = folder / "authorized_keys"
    shutil.copyfile(client_key.with_suffix(".pub"), authorized)
    os.chmod(authorized, 0o600)
    Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)  # sshd's privilege separation folder
    port = _free_port()
    config = folder / "sshd_config"
    config.write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {host_key}", f"PidFile {folder / 'sshd.pid'}",
        f"AuthorizedKeysFile {authorized}", "PubkeyAuthentication yes", "PasswordAuthentication no",
        "KbdInteractiveAuthentication no", "PermitRootLogin prohibit-password", "StrictModes no", "UsePAM no",
        "LogLevel ERROR", "",
    ]))
    log = open(folder / "sshd.log", "wb")  # noqa: SIM115 - closed when the test's sshd ends
    process = subprocess.Popen([SSHD, "-D", "-e", "-p", str(port), "-f", str(config)], stdout=log,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    rsh = (f"ssh -p {port} -i {client_key} -o IdentitiesOnly=yes -o BatchMode=yes -o LogLevel=ERROR "
           f"-o UserKnownHostsFile={folder / 'known_hosts'} -o StrictHostKeyChecking=accept-new")
    sshd = Sshd(process, port, rsh)
    done = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"sshd exited at start (code {process.returncode}): "
                        + (folder / "sshd.log").read_text(errors="replace")[-2000:])
        try:
            done = subprocess.run([*rsh.split(), "root@127.0.0.1", "true"], capture_output=True, timeout=20)
        except subprocess.TimeoutExpired:
            continue
        if done.returncode == 0:
            return sshd
        time.sleep(0.2)
    sshd.stop()
    pytest.fail("sshd did not accept a login within 30 s: " + (folder / "sshd.log").read_text(errors="replace")[-2000:]
                + (done.stderr.decode(errors="replace")[-1000:] if done is not None else ""))
