"""A trainer added as a separate installable package (tests/toy_backend, entry point `yolotui.backends`), with no
line of yolotui changed for it: launched, followed, stopped, resumed in the resume wizard, killed and resumed with `yolotui resume`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tui_fakes import wait_until
from wizard_kit import HostApp

from tests.runs_helpers import reap_runs, wait_for  # noqa: F401  (reap_runs: autouse fixture)
from yolotui.runs.results import read_rows
from yolotui.runs.status import effective_state, read_status

TOY = Path(__file__).resolve().parent / "toy_backend"
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def toy_site(tmp_path_factory):
    """The toy package installed into a folder of its own (pip --target), as a user would install it."""
    source = tmp_path_factory.mktemp("toy-src") / "toy_backend"
    shutil.copytree(TOY, source)  # a build leaves files beside its source: not in the repository
    target = tmp_path_factory.mktemp("toy-site")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                           "--quiet", "--target", str(target), str(source)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return target


@pytest.fixture
def toy_env(toy_site, monkeypatch):
    """This process and the CLI's subprocesses see the installed toy package (the wizard's launcher too)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), str(toy_site)]))
    monkeypatch.setenv("PYTHONUNBUFFERED", "1")
    monkeypatch.setenv("TOY_BATCH_S", "0.15")
    monkeypatch.setenv("TOY_HOLD_AT", "5")  # the last epoch waits for RUN/go: the kill below is not a race
    monkeypatch.syspath_prepend(str(toy_site))
    from yolotui import backends

    backends.discover(refresh=True)
    yield dict(os.environ)
    backends.REGISTRY.pop("toy", None)
    backends._instances.pop("toy", None)


def yolotui(args, env, cwd):
    return subprocess.run([sys.executable, "-m", "yolotui", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, stdin=subprocess.DEVNULL, timeout=120)


def summary(run_dir, env):
    proc = yolotui(["status", str(run_dir), "--json"], env, run_dir.parent)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_a_toy_backend_from_its_own_package_launches_stops_resumes_and_survives_a_kill(tmp_path, toy_env):
    from yolotui.tui.screens.wizard_resume import RESUME, ResumeWizard

    run_dir = tmp_path / "runs" / "toy"
    started = yolotui(["train", "--backend", "toy", "--epochs", "6", "--toy-batches", "3", "--project",
                       str(run_dir.parent), "--name", "toy"], toy_env, tmp_path)  # --toy-batches: the toy's flag
    assert started.returncode == 0, started.stdout + started.stderr
    assert "the toy trainer, from its own package" in started.stdout
    assert wait_for(lambda: (summary(run_dir, toy_env)["summary"]["epoch"] or 0) >= 1, timeout=60)
    shown = summary(run_dir, toy_env)
    assert shown["backend"] == "toy" and shown["summary"]["epochs"] == 6
    assert read_status(run_dir).command[-1] == "3"
    refused = yolotui(["save", str(run_dir)], toy_env, tmp_path)  # its own "cannot" note
    assert refused.returncode == 1 and "keeps its state at every epoch's end" in refused.stderr

    assert yolotui(["stop", str(run_dir)], toy_env, tmp_path).returncode == 0
    assert wait_for(lambda: effective_state(run_dir) == "stopped", timeout=60), read_status(run_dir)
    stopped_at = json.loads((run_dir / "toy_state.json").read_text())["epoch"]
    assert 1 <= stopped_at < 6

    app = HostApp(lambda: ResumeWizard(run_dir))  # the real diagnosis and the real CLI behind it
    async with app.run_test(size=(120, 40)) as pilot:
        wizard = app.wizard
        assert await wait_until(pilot, lambda: wizard.facts is not None, timeout=60)
        await pilot.pause()
        assert [(c.key, c.label) for c in wizard.choices][0] == (RESUME, "continue the toy trainer from its own state")
        assert wizard.command_args()[0] == "resume" and "--trust" not in wizard.command_args()
        await pilot.press("ctrl+s")
        assert await wait_until(pilot, lambda: wizard.last_result is not None, timeout=60)
        assert wizard.last_result.returncode == 0, wizard.last_result.stderr
    holding = run_dir / "holding"
    assert wait_for(lambda: holding.exists() and read_status(run_dir).trainer_pid == int(holding.read_text() or 0),
                    timeout=60), read_status(run_dir)
    assert summary(run_dir, toy_env)["summary"]["epoch"] == 5  # resumed from its own state, not from scratch
    os.kill(read_status(run_dir).trainer_pid, signal.SIGKILL)  # killed from outside: not retried, resumed by the user
    assert wait_for(lambda: effective_state(run_dir) == "failed", timeout=60), read_status(run_dir)
    assert read_status(run_dir).failure_class == "killed"
    (run_dir / "go").touch()
    resumed = yolotui(["resume", str(run_dir)], toy_env, tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert wait_for(lambda: effective_state(run_dir) == "finished", timeout=90), read_status(run_dir)
    assert {int(row["epoch"]) for row in read_rows(run_dir / "results.csv")} == set(range(6))
    assert summary(run_dir, toy_env)["summary"]["epoch"] == 6
