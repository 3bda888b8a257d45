"""The rule for a test whose system package is missing: skipped with the install command, failed under CI."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import syspkg


@pytest.fixture
def no_programs(tmp_path, monkeypatch):
    """A PATH with nothing on it, so every package looked up by name is missing."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    return empty


def test_a_missing_package_skips_with_its_install_command(no_programs, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"needs rsync, not installed here: apt-get install -y rsync$"):
        syspkg.require("rsync")
    with pytest.raises(pytest.skip.Exception, match=r"apt-get install -y slurm-wlm munge$"):
        syspkg.require("slurm", why="a local SLURM")


@pytest.mark.parametrize("value", ["true", "True", "1"])
def test_under_ci_a_missing_package_fails(no_programs, monkeypatch, value):
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match=r"needs tmux, not installed here: apt-get install -y tmux"):
        syspkg.require("tmux")


def test_an_installed_package_passes_and_ci_false_still_skips(no_programs, monkeypatch):
    program = no_programs / "rsync"
    program.write_text("#!/bin/sh\n")
    os.chmod(program, 0o755)
    monkeypatch.setenv("CI", "true")
    syspkg.require("rsync")
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="apt-get install -y tmux"):
        syspkg.require("tmux")


def test_root_is_required_like_a_package(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="must run as root"):
        syspkg.require(root=True, why="a private sshd")


def test_a_missing_python_module_skips_with_the_pip_command_and_fails_under_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    assert syspkg.require_module("json").dumps([1]) == "[1]"
    with pytest.raises(pytest.skip.Exception, match=r"needs the Python module no_such_mod_x .*pip install -e '.\[test\]'$"):
        syspkg.require_module("no_such_mod_x", why="a check")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="no_such_mod_x"):
        syspkg.require_module("no_such_mod_x")


def test_an_unknown_package_name_is_an_error():
    with pytest.raises(KeyError, match="tests/syspkg.py"):
        syspkg.needs("rsnyc")


def test_every_package_the_suite_uses_is_known_to_ci():
    """.ci/run installs every package of the table and runs the tests with CI=true."""
    script = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text()
    assert "export CI=true" in script
    for package in syspkg.PACKAGES.values():
        for name in package.install.split():
            assert name in script, f".ci/run does not install {name}"
