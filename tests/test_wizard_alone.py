"""`yolotui attach RUN --wizard resume|finetune` (Pilot): the run's wizard alone, what another host's yolotui opens
over ssh -t for a remote row's R and F. A launch opens the resumed run's dashboard; a cancel quits the app, also
after "fine-tune instead" handed over to the fine-tune wizard; a missing folder quits with an error."""

from __future__ import annotations

import pytest
from tui_fakes import FakeSampler, wait_until
from wizard_kit import CaptureLauncher, fake_diagnosis, make_plain_run

from yolotui.tui.app import YolotuiApp
from yolotui.tui.screens.wizard_finetune import FinetuneWizard
from yolotui.tui.screens.wizard_resume import FINETUNE, ResumeWizard

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def alone(run_dir, wizard: str, launcher=None) -> YolotuiApp:
    app = YolotuiApp(run_dir=run_dir, wizard=wizard, sampler=FakeSampler(), gpu_interval=None, remember_theme=False)
    app.run_diagnose = lambda path: fake_diagnosis(path, "resume")
    app.launcher = launcher or CaptureLauncher(run_dir)
    return app


async def resume_wizard_up(pilot) -> None:
    """Wait until the resume wizard shows its diagnosis and choices."""
    app = pilot.app
    assert await wait_until(pilot, lambda: isinstance(app.screen, ResumeWizard) and app.screen.facts is not None)
    await pilot.pause()


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return make_plain_run(tmp_path / "runs" / "exp")


async def test_the_resume_wizard_alone_quits_on_cancel(run):
    app = alone(run, "resume")
    async with app.run_test(size=(120, 40)) as pilot:
        await resume_wizard_up(pilot)
        await pilot.press("escape")
        assert await wait_until(pilot, lambda: app._exit)
    assert app.return_value == 0 and app.launcher.calls == []


async def test_a_launch_opens_the_run_dashboard_instead_of_quitting(run):
    from yolotui.tui.screens.dashboard import DashboardScreen

    app = alone(run, "resume")
    async with app.run_test(size=(120, 40)) as pilot:
        await resume_wizard_up(pilot)
        await pilot.press("ctrl+s")
        assert await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        assert not app._exit
        assert app.launcher.calls and app.launcher.calls[0][:2] == ["resume", "runs/exp"]  # shown relative to cwd


async def test_fine_tune_instead_hands_over_and_its_cancel_quits(run):
    app = alone(run, "resume")
    async with app.run_test(size=(120, 40)) as pilot:
        await resume_wizard_up(pilot)
        app.screen.select(FINETUNE)
        await pilot.press("ctrl+s")
        assert await wait_until(pilot, lambda: isinstance(app.screen, FinetuneWizard))
        await pilot.pause()
        assert not app._exit  # the resume wizard's dismissal did not quit: the fine-tune wizard is up
        await pilot.press("escape")
        assert await wait_until(pilot, lambda: app._exit)


async def test_the_fine_tune_wizard_alone_and_a_missing_folder(run, tmp_path):
    app = alone(run, "finetune")
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_until(pilot, lambda: isinstance(app.screen, FinetuneWizard))
    gone = alone(tmp_path / "nope", "resume")
    async with gone.run_test(size=(120, 40)) as pilot:
        assert await wait_until(pilot, lambda: gone._exit)
    assert gone.return_value == 2
