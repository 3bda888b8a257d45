"""Shared fixtures: every test gets its own YOLOTUI_HOME so the global run index is isolated."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


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
