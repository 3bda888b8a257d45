"""The system packages the test suite uses, and the one rule for a missing one.

A test that needs a Debian package (tmux, rsync, openssh-server, chromium, slurm-wlm + munge, zsh, fish) says so with
`@needs("rsync")` (a marker that tests/conftest.py checks before the test runs) or by calling
`require("rsync")` from a helper. Where the package is missing the test is skipped with the command that
installs it; under CI (the environment has CI=true, as .ci/run sets) it fails instead, so CI can never go
green by skipping. The same holds for the tests that must run as root (a private sshd, a local SLURM), and for
the optional Python modules of the test extra (`require_module`).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

import pytest

MARKER = "system_packages"


@dataclass(frozen=True)
class Package:
    """A Debian package (or set of them) and the programs the tests look for to know it is installed."""

    install: str  # what `apt-get install -y` takes
    programs: tuple[str, ...]  # names looked up on PATH, or absolute paths


SLURM_PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol", "sinfo")

PACKAGES = {
    "tmux": Package("tmux", ("tmux",)),
    "rsync": Package("rsync", ("rsync",)),
    "openssh-server": Package("openssh-server", ("/usr/sbin/sshd", "ssh", "ssh-keygen")),
    "chromium": Package("chromium", ("/usr/bin/chromium",)),
    "slurm": Package("slurm-wlm munge", SLURM_PROGRAMS),
    "zsh": Package("zsh", ("zsh",)),
    "fish": Package("fish", ("fish",)),
}

# Python packages of the test extra that some tests import: the same rule (skip with the install command, fail
# under CI, where `pip install -e '.[test]'` must have brought them).
EXTRA = ".[test]"


def under_ci(environ: dict[str, str] | None = None) -> bool:
    """True when the tests run under CI (CI=true, or 1/yes): there, nothing may skip for a missing package."""
    value = (os.environ if environ is None else environ).get("CI", "")
    return value.strip().lower() in ("true", "1", "yes")


def _present(program: str) -> bool:
    if os.sep in program:
        return os.path.isfile(program) and os.access(program, os.X_OK)
    return shutil.which(program) is not None


def missing(*names: str) -> list[str]:
    """The programs of the packages `names` (keys of PACKAGES) that this machine lacks."""
    unknown = [name for name in names if name not in PACKAGES]
    if unknown:
        raise KeyError(f"unknown system package {', '.join(unknown)}: add it to tests/syspkg.py PACKAGES")
    return [program for name in names for program in PACKAGES[name].programs if not _present(program)]


def install_command(*names: str) -> str:
    """`apt-get install -y ...` for the packages `names`."""
    return "apt-get install -y " + " ".join(PACKAGES[name].install for name in names)


def unavailable(reason: str) -> None:
    """Skip the current test saying `reason`, or fail it under CI (never returns)."""
    if under_ci():
        pytest.fail(f"{reason} (CI=true: a missing system package or privilege fails the test, never skips it)",
                    pytrace=False)
    pytest.skip(reason)


def problem(*names: str, root: bool = False, why: str = "") -> str | None:
    """Why a test needing the packages `names` (and root, with `root`) cannot run here, or None when it can.
    `why` names what needs them, for the message."""
    absent = missing(*names)
    lead = f"{why} " if why else ""
    if absent:
        return f"{lead}needs {', '.join(absent)}, not installed here: {install_command(*names)}"
    if root and os.geteuid() != 0:
        return f"{lead}must run as root (CI runs as root)"
    return None


def require(*names: str, root: bool = False, why: str = "") -> None:
    """Return when the packages `names` are installed (and, with `root`, the tests run as root); else skip
    with the install command (fail under CI)."""
    reason = problem(*names, root=root, why=why)
    if reason:
        unavailable(reason)


def require_module(module: str, why: str = ""):
    """The module `module` imported; when it is missing, skip with the pip command (fail under CI)."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        lead = f"{why} " if why else ""
        unavailable(f"{lead}needs the Python module {module} ({exc}): pip install -e '{EXTRA}'")


def needs(*names: str, root: bool = False) -> pytest.MarkDecorator:
    """A marker for a test (or a module's pytestmark) that needs the packages `names`: see `require`."""
    missing(*names)  # an unknown name is an error at import, not at run time
    return getattr(pytest.mark, MARKER)(*names, root=root)
