"""Shared fixtures: every test gets its own YOLOTUI_HOME so the global run index is isolated.

Also the check behind `syspkg.needs(...)`: a test marked so is skipped with the install command when a system
package it needs is missing, and fails instead under CI (CI=true); see tests/syspkg.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import syspkg

REPO_ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", f"{syspkg.MARKER}(*names, root=False): needs these system packages "
                                       "(tests/syspkg.py): skipped with the install command, or failed under CI")


def pytest_collection_modifyitems(config, items) -> None:
    """Outside CI, a test marked `needs(...)` whose package is missing is skipped (reported at the test)."""
    if syspkg.under_ci():
        return
    for item in items:
        for mark in item.iter_markers(syspkg.MARKER):
            reason = syspkg.problem(*mark.args, **mark.kwargs)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
                break


def pytest_runtest_setup(item) -> None:
    """Under CI, a test marked `needs(...)` whose package is missing fails (it is never skipped)."""
    for mark in item.iter_markers(syspkg.MARKER):
        syspkg.require(*mark.args, **mark.kwargs)


@pytest.fixture(autouse=True)
def yolotui_home(tmp_path_factory, monkeypatch) -> Path:
    """An empty yolotui state folder for this test, exported as YOLOTUI_HOME."""
    home = tmp_path_factory.mktemp("yolotui-home")
    monkeypatch.setenv("YOLOTUI_HOME", str(home))
    return home


@pytest.fixture
def cli_env() -> dict[str, str]:
    """Environment for running `python -m yolotui` in a subprocess against this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture
def yolotui_cmd() -> list[str]:
    """The argv prefix that runs this checkout's CLI."""
    return [sys.executable, "-m", "yolotui"]
