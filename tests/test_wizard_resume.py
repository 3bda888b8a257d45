"""Resume wizard (Pilot, fake diagnoses): the diagnosis first, then only the choices that fit; each choice runs its
`yolotui resume` line; bad batch / epochs show inline errors and launch nothing."""

from __future__ import annotations

import pytest
from textual.widgets import Input, RadioSet, Static
from tui_fakes import rendered, wait_until
from wizard_kit import CaptureLauncher, HostApp, fake_diagnosis, make_plain_run, verdict

from yolotui.tui.screens.wizard_resume import (
    EXTEND,
    FINETUNE,
    FROM,
    RESUME,
    SMALLER,
    ResumeFacts,
    ResumeWizard,
    resume_choices,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return make_plain_run(tmp_path / "runs" / "exp", batch=16)


def host(run_dir, kind, launcher, opened=None):
    return HostApp(lambda: ResumeWizard(run_dir, launcher, diagnose=lambda path: fake_diagnosis(path, kind),
                                        open_finetune=(opened.append if opened is not None else None)))


async def ready(pilot) -> ResumeWizard:
    wizard = pilot.app.wizard
    assert await wait_until(pilot, lambda: wizard.facts is not None)
    await pilot.pause()
    return wizard


def keys(wizard) -> list[str]:
    return [choice.key for choice in wizard.choices]


def test_choices_follow_the_diagnosis(tmp_path):
    run = make_plain_run(tmp_path / "exp")

    def choices(kind):
        return [(c.key, c.checkpoint) for c in resume_choices(ResumeFacts(fake_diagnosis(run, kind), 16, []))]

    assert choices("resume") == [(RESUME, None), (SMALLER, None), (FINETUNE, None)]
    assert choices("finished") == [(EXTEND, None), (FINETUNE, None)]
    assert choices("corrupt") == [(FROM, "best.pt"), (FINETUNE, None)]
    assert choices("live") == []
    assert choices("nothing") == []
    # an epoch checkpoint that is resumable is offered too when last.pt is damaged
    other = verdict(run, "epoch4.pt", "resumable", 5)
    offered = resume_choices(ResumeFacts(fake_diagnosis(run, "corrupt"), 16, [other]))
    assert [(c.key, c.checkpoint, c.epoch) for c in offered] == [
        (FROM, "best.pt", 2), (FROM, "epoch4.pt", 5), (FINETUNE, None, None)]
    # batch 1 cannot get smaller
    assert SMALLER not in [c.key for c in resume_choices(ResumeFacts(fake_diagnosis(run, "resume"), 1, []))]


async def test_diagnosis_is_shown_then_resume_as_is(run_dir):
    launcher = CaptureLauncher(run_dir)
    app = host(run_dir, "resume", launcher)
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = await ready(pilot)
        text = rendered(wizard.query_one("#diagnosis", Static))
        for words in ("RESUMABLE (3/10 epochs done + 5 batches of epoch 4", "failure  killed: killed by SIGKILL",
                      "drift    hyp.yaml lr0: 0.01 → 0.02", "env      torch 2.14.1", "advice   resume from last.pt"):
            assert words in text, words
        assert keys(wizard) == [RESUME, SMALLER, FINETUNE]
        assert wizard.selected().key == RESUME
        assert "yolotui resume runs/exp" in rendered(wizard.query_one("#command", Static))
        await pilot.press("ctrl+s")
        assert await wait_until(pilot, lambda: app.results)
    assert launcher.calls == [["resume", "runs/exp"]]
    assert app.results == [run_dir]


async def test_oom_preselects_a_smaller_batch_and_checks_it(run_dir):
    launcher = CaptureLauncher(run_dir)
    app = host(run_dir, "oom", launcher)
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = await ready(pilot)
        assert wizard.selected().key == SMALLER
        batch = wizard.query_one("#batch", Input)
        assert batch.value == "8" and wizard.query_one("#batch-field").display
        for bad, words in (("16", "must be below the current 16"), ("0", "at least 1"), ("x", "not a whole number")):
            batch.value = bad
            await pilot.press("ctrl+s")
            await pilot.pause(0.05)
            assert words in rendered(wizard.query_one("#batch-error", Static)), bad
            assert launcher.calls == []
        batch.value = "4"
        await pilot.pause()
        assert "--batch-size 4" in rendered(wizard.query_one("#command", Static))
        await pilot.press("ctrl+s")
        assert await wait_until(pilot, lambda: app.results)
    assert launcher.calls == [["resume", "runs/exp", "--batch-size", "4"]]


async def test_finished_run_extends_above_the_current_epoch(run_dir):
    launcher = CaptureLauncher(run_dir)
    app = host(run_dir, "finished", launcher)
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = await ready(pilot)
        assert keys(wizard) == [EXTEND, FINETUNE]
        epochs = wizard.query_one("#epochs", Input)
        assert epochs.value == "20"
        for bad in ("10", "3"):
            epochs.value = bad
            await pilot.press("ctrl+s")
            await pilot.pause(0.05)
            assert f"{bad} is not above the current epoch (10): give at least 11" in \
                rendered(wizard.query_one("#epochs-error", Static))
            assert wizard.query_one("#epochs-error").has_class("-shown")
        assert launcher.calls == [] and app.results == []
        epochs.value = "15"
        await pilot.pause()
        assert not wizard.query_one("#epochs-error").has_class("-shown")  # fixed: the error goes
        await pilot.press("ctrl+s")
        assert await wait_until(pilot, lambda: app.results)
    assert launcher.calls == [["resume", "runs/exp", "--epochs", "15"]]


async def test_corrupt_last_resumes_from_best(run_dir):
    launcher = CaptureLauncher(run_dir)
    app = host(run_dir, "corrupt", launcher)
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = await ready(pilot)
        assert "CORRUPT (4m old) — truncated zip" in rendered(wizard.query_one("#diagnosis", Static))
        assert keys(wizard) == [FROM, FINETUNE]
        assert "--from best.pt" in rendered(wizard.query_one("#command", Static))
        await pilot.press("ctrl+s")
        assert await wait_until(pilot, lambda: app.results)
    assert launcher.calls == [["resume", "runs/exp", "--from", "best.pt"]]


async def test_finetune_choice_hands_over_to_the_finetune_wizard(run_dir):
    launcher, opened = CaptureLauncher(run_dir), []
    app = host(run_dir, "finished", launcher, opened)
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = await ready(pilot)
        await pilot.press("down")  # keyboard: the radio set has focus; move to fine-tune and pick it
        await pilot.press("enter")
        assert wizard.selected().key == FINETUNE
        assert "fine-tune wizard" in rendered(wizard.query_one("#command", Static))
        await pilot.press("ctrl+s")
        assert await wait_until(pilot, lambda: app.results)
    assert launcher.calls == [] and opened == [run_dir]


@pytest.mark.parametrize("kind, words", [("live", "the run is live: stop it first"),
                                         ("nothing", "no usable checkpoint")])
async def test_nothing_to_choose_launches_nothing(run_dir, kind, words):
    launcher = CaptureLauncher(run_dir)
    app = host(run_dir, kind, launcher)
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = await ready(pilot)
        assert words in rendered(wizard.query_one("#choice-placeholder", Static))
        assert not wizard.query(RadioSet)
        await pilot.press("ctrl+s")
        await pilot.pause(0.05)
        assert "nothing was launched" in rendered(wizard.query_one("#status", Static))
    assert launcher.calls == []


async def test_real_diagnosis_of_a_folder_without_checkpoints(run_dir):
    """yolotui.health's diagnose_run runs in the worker (the environment probe, slow here, is left to the
    end-to-end test); a run with no weights has nothing to resume."""
    from yolotui.jobs.doctor import diagnose_run

    launcher = CaptureLauncher(run_dir)
    app = HostApp(lambda: ResumeWizard(run_dir, launcher,
                                       diagnose=lambda path: diagnose_run(path, environment=False, logind=False)))
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = app.wizard
        assert await wait_until(pilot, lambda: wizard.facts is not None, timeout=60)
        assert "MISSING" in rendered(wizard.query_one("#diagnosis", Static))
        assert wizard.choices == []
    assert launcher.calls == []


def test_gather_facts_offers_resumable_epoch_checkpoints_on_disk(tmp_path):
    """Real files and yolotui.health: last.pt torn, best.pt finished, epoch4.pt resumable -> resume from epoch4.pt."""
    from _health_fixtures import save_yolotui
    from wizard_kit import make_source_run

    from yolotui.jobs.doctor import diagnose_run
    from yolotui.tui.screens.wizard_resume import gather_facts

    run = make_source_run(tmp_path / "runs" / "exp", batch=16)
    weights = run / "weights"
    save_yolotui(weights / "epoch4.pt", epoch=5, epochs=10)
    (weights / "last.pt").write_bytes((weights / "last.pt").read_bytes()[:300])
    facts = gather_facts(run, lambda path: diagnose_run(path, environment=False, logind=False))
    assert facts.diagnosis.last.verdict == "corrupt" and facts.batch_size == 16
    offered = [(c.key, c.checkpoint) for c in resume_choices(facts)]
    assert (FROM, "epoch4.pt") in offered and offered[-1] == (FINETUNE, None)


def test_an_exec_run_offers_one_resume_its_command_again(tmp_path):
    run = make_plain_run(tmp_path / "exp")
    for kind in ("resume", "corrupt", "nothing"):  # whatever checkpoints its command left: one resume, never twice
        choices = resume_choices(ResumeFacts(fake_diagnosis(run, kind), 16, [], backend="exec"))
        resumes = [c for c in choices if c.key == RESUME]
        assert len(resumes) == 1 and "run its command again" in resumes[0].label, (kind, choices)
        assert not {c.key for c in choices} & {SMALLER, EXTEND, FROM}


async def test_a_run_yaml_yolotui_did_not_write_is_shown_and_needs_the_trust_box(run_dir):
    from textual.widgets import Checkbox

    (run_dir / "run.yaml").write_text("name: exp\nbackend: exec\ncommand: [/bin/sh, -c, touch PWNED]\n"
                                      "env: {LD_PRELOAD: /tmp/evil.so}\n")  # copied in: no seal of this user's
    launcher = CaptureLauncher(run_dir)
    app = host(run_dir, "resume", launcher)
    async with app.run_test(size=(100, 40)) as pilot:
        wizard = await ready(pilot)
        text = rendered(wizard.query_one("#diagnosis", Static))
        assert "untrusted" in text and "/bin/sh -c touch PWNED" in text and "LD_PRELOAD" in text
        assert not wizard.query_one("#trust-field").has_class("hidden")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert launcher.calls == [] and "tick the box" in wizard.errors.get("trust", "")
        wizard.query_one("#trust", Checkbox).value = True
        await pilot.pause()
        await pilot.press("ctrl+s")
        assert await wait_until(pilot, lambda: app.results)
    assert launcher.calls == [["resume", "runs/exp", "--trust"]]


async def test_a_run_yaml_yolotui_wrote_asks_nothing(run_dir):
    from yolotui.runs.runconfig import write_run_config

    write_run_config(run_dir, {"name": "exp", "backend": "exec", "command": ["python", "train.py"], "env": {}})
    launcher = CaptureLauncher(run_dir)
    app = host(run_dir, "resume", launcher)
    async with app.run_test(size=(100, 40)) as pilot:
        wizard = await ready(pilot)
        assert "untrusted" not in rendered(wizard.query_one("#diagnosis", Static))
        assert wizard.query_one("#trust-field").has_class("hidden")
        await pilot.press("ctrl+s")
        assert await wait_until(pilot, lambda: app.results)
    assert launcher.calls == [["resume", "runs/exp"]]


def test_an_exec_runs_doctor_says_its_resume_reruns_the_command(tmp_path):
    from yolotui.jobs.doctor import diagnose_run
    from yolotui.runs.runconfig import write_run_config

    run = make_plain_run(tmp_path / "wiz")
    write_run_config(run, {"name": "wiz", "backend": "exec", "command": ["python", "t.py"], "env": {}})
    diagnosis = diagnose_run(run, environment=False, logind=False)
    assert diagnosis.recommended == "restart"
    assert "`yolotui resume wiz` reruns its command unchanged" in diagnosis.advice
