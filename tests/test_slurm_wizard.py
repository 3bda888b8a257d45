"""The new-run wizard offers a SLURM job where settings.yaml has a `slurm:` section."""

from __future__ import annotations

import pytest
from textual.widgets import Input, Static
from tui_fakes import FakeSampler, rendered, wait_until
from wizard_kit import CaptureLauncher, HostApp, make_data, write_tiny_cfg

from yolotui.tui.screens.wizard_new_run import NewRunWizard

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_data(tmp_path / "data")
    write_tiny_cfg(tmp_path)
    return tmp_path


def _settings(home, text: str) -> None:
    (home / "config").mkdir(parents=True, exist_ok=True)
    (home / "config" / "settings.yaml").write_text(text)


def _host(launcher, slurm: str) -> HostApp:
    return HostApp(lambda: NewRunWizard(launcher, sampler=FakeSampler(gpu=False),
                                        values={"data": "data/data.yaml", "slurm": slurm}))


async def _ready(pilot):
    wizard = pilot.app.wizard
    assert await wait_until(pilot, lambda: wizard.gpu_indices is not None and wizard.data_facts is not None)
    return wizard


async def test_wizard_submits_to_slurm_with_the_options_typed(workdir, yolotui_home):
    _settings(yolotui_home, "slurm:\n  partition: gpu\n")
    launcher = CaptureLauncher(workdir / "runs" / "train" / "exp")
    app = _host(launcher, "--time=4:00:00 --gpus=2")
    async with app.run_test(size=(80, 30)) as pilot:
        wizard = await _ready(pilot)
        assert "partition gpu" in rendered(wizard.query_one("#slurm-hint", Static))
        await pilot.press("ctrl+s")
        assert await wait_until(pilot, lambda: app.results)
    assert launcher.calls[0][-3:] == ["--slurm", "--sbatch-arg=--time=4:00:00", "--sbatch-arg=--gpus=2"]


async def test_wizard_refuses_a_slurm_value_that_is_no_option(workdir, yolotui_home):
    _settings(yolotui_home, "slurm:\n  partition: gpu\n")
    launcher = CaptureLauncher(workdir / "runs" / "train" / "exp")
    app = _host(launcher, "gpu")
    async with app.run_test(size=(80, 30)) as pilot:
        wizard = await _ready(pilot)
        await pilot.press("ctrl+s")
        assert await wait_until(pilot, lambda: "not an sbatch option" in rendered(
            wizard.query_one("#slurm-error", Static)))
    assert launcher.calls == []


async def test_without_slurm_settings_there_is_no_slurm_field(workdir):
    launcher = CaptureLauncher(workdir / "runs" / "train" / "exp")
    app = _host(launcher, "")
    async with app.run_test(size=(80, 30)) as pilot:
        wizard = await _ready(pilot)
        assert not wizard.query("#slurm")
        assert wizard.query_one("#name", Input)
