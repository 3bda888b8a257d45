"""Issue #15, "the first hour": every number on screen is true, no false alarms, small things users expect.

One test (or a few) per item: 3 (demo opens the live demo), 5 (one epoch numbering), 6 (ETA, speed, elapsed,
first start), 7 (GPU panel text, primed CPU reading, status says what was updated), 10 (no interrupted toast
during a resume), 11 (no warning for a chosen shipped config), 12 (val's image size), 13 (`d` removes a run),
14 (wizards and table details).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import time
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from runs_helpers import kill_run, reap_runs, wait_for  # noqa: F401  (reap_runs: an autouse fixture)
from tui_fakes import FakeHost, FakeSampler, FakeSnapshot, rendered, wait_until
from tui_fixtures import FIXED_NOW, make_run

from yolotui import formatting
from yolotui.runs import lock
from yolotui.runs.atomic import atomic_write_json
from yolotui.runs.layout import EVENTS_JSONL
from yolotui.runs.status import RunStatus, effective_state, read_status, status_path
from yolotui.tui.app import YolotuiApp
from yolotui.tui.screens.dashboard import DashboardScreen

anyio = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def make_app(run_dir=None, sampler=None, **kwargs) -> YolotuiApp:
    return YolotuiApp(run_dir=run_dir, sampler=sampler or FakeSampler(), clock=lambda: FIXED_NOW,
                      gpu_interval=None, **kwargs)


async def open_dashboard(pilot, app) -> DashboardScreen:
    assert await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.settled)
    await pilot.pause()
    return app.screen


# -- 3: `yolotui demo` again while a demo trains opens it ----------------------------------------------------
def _demo_args(tmp_path: Path, **extra) -> argparse.Namespace:
    from yolotui.commands import demo

    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    data_dir = tmp_path / "demo-data"
    data_dir.mkdir(exist_ok=True)
    (data_dir / "data.yaml").write_text("train: images/train\nval: images/val\nnames: [a]\n")
    argv = ["--data-dir", str(data_dir), "--project", str(tmp_path / "runs"), "--detach"]
    for key, value in extra.items():
        argv += [f"--{key}", str(value)]
    return parser.parse_args(argv)


def test_demo_again_opens_the_live_demo_and_says_so(tmp_path):
    from yolotui.commands import demo

    run = make_run(tmp_path / "runs", "demo", state="running", epochs=50, done_epochs=2, hold_lock=True)
    try:
        out = io.StringIO()
        with redirect_stdout(out):
            assert demo.run(_demo_args(tmp_path)) == 0
        text = out.getvalue()
        assert "a demo is already training (run demo): opening it" in text
        assert "demo demo" not in text  # the run's name once, not after the word it repeats
        assert "started demo run" not in text
        assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["demo"], "no demo2 was started"
    finally:
        run.release()


def test_live_demo_finds_only_live_numbered_demos(tmp_path):
    from yolotui.jobs.demo import live_demo

    project = tmp_path / "runs"
    make_run(project, "demo", state="finished", epochs=5, done_epochs=5)
    assert live_demo(project, "demo") is None  # an ended demo does not stop a new one
    run = make_run(project, "demo3", state="running", epochs=5, done_epochs=1, hold_lock=True)
    make_run(project, "demonstration", state="running", epochs=5, done_epochs=1)
    try:
        assert live_demo(project, "demo") == (project / "demo3").resolve()
        elsewhere = tmp_path / "another-folder"
        elsewhere.mkdir()
        assert live_demo(elsewhere, "demo") == (project / "demo3").resolve()  # found through the run index
    finally:
        run.release()


# -- 5: one epoch numbering: the dashboard, the resume wizard and doctor agree on one run folder --------------
@anyio
async def test_dashboard_wizard_and_doctor_number_epochs_alike(tmp_path):
    from yolotui.health.report import render_text
    from yolotui.jobs.doctor import diagnose_run
    from yolotui.tui.screens.wizard_resume import diagnosis_text, gather_facts, resume_choices

    run = make_run(tmp_path / "runs", "same-run", state="stopped", epochs=50, done_epochs=5, batch_in_progress=7)
    quick = lambda path: diagnose_run(path, environment=False, logind=False)  # noqa: E731
    doctor = render_text(quick(run.path))
    facts = gather_facts(run.path, quick)
    wizard = "\n".join([choice.label for choice in resume_choices(facts)] + [diagnosis_text(facts)])
    app = make_app(run.path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_dashboard(pilot, app)
        dashboard = rendered(screen.query_one("#progress")) + rendered(screen.query_one("#checkpoints"))
    for who, text in (("doctor", doctor), ("wizard", wizard), ("dashboard", dashboard)):
        assert "5/50" in text, (who, text)
        assert "6/50" not in text and "4/50" not in text, (who, text)
    assert "resumes after 5/50 epochs done" in doctor and "resume as is (5/50 epochs done)" in wizard
    assert "epoch 6 of 50" in dashboard  # the epoch in progress, by ordinal, never with a slash


def test_the_one_epoch_convention():
    assert formatting.epochs(5, 50) == "5/50"
    assert formatting.epochs_done(5, 50) == "5/50 epochs done"
    assert formatting.epochs_done(5, 50, step=12) == "5/50 epochs done + 12 batches of epoch 6"
    assert formatting.epochs_done(1, None) == "1 epoch done"
    assert formatting.epoch_in_progress(5, 50) == "epoch 6 of 50"
    assert "k/N" in formatting.__doc__ and "epochs done" in formatting.__doc__


def test_plain_follow_uses_the_same_numbering():
    from yolotui.commands._progress import describe

    batch = describe({"type": "batch", "epoch": 5, "epochs": 50, "batch": 3, "batches": 10, "imgs_per_s": 4.2})
    epoch = describe({"type": "epoch", "epoch": 5, "epochs": 50, "metrics": {}, "seconds": 3})
    assert batch.startswith("epoch 6 of 50") and "4.2 img/s" in batch
    assert epoch.startswith("6/50 epochs done")


# -- 6: ETA from wall time, no ETA/speed on ended runs, elapsed over attempts, first start, slow speeds ----
def _events(path: Path, events: list[dict]) -> None:
    path.write_text("".join(json.dumps({"attempt": 1, **e}) + "\n" for e in events))


def test_eta_uses_wall_time_per_epoch_including_validation(tmp_path):
    from yolotui.tui.runview import RunReader

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # Each epoch trains for 60 s (`seconds`) but validation and the checkpoint make it 100 s of wall time.
    events = [{"ts": 1000.0, "type": "start"}]
    for epoch in range(3):
        events.append({"ts": 1000.0 + 100 * (epoch + 1), "type": "epoch", "epoch": epoch, "epochs": 10,
                       "losses": {}, "metrics": {}, "seconds": 60.0})
    _events(run_dir / EVENTS_JSONL, events)
    view = RunReader(run_dir).refresh()
    assert view.epoch_seconds == pytest.approx(100.0)
    assert view.overall_eta() == pytest.approx(700.0)  # 7 epochs left at 100 s, not 7 x 60 s


@anyio
async def test_ended_runs_show_no_eta_and_no_speed(tmp_path):
    run = make_run(tmp_path / "runs", "stopped-run", state="stopped", epochs=20, done_epochs=3,
                   batch_in_progress=4)
    app = make_app(run.path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_dashboard(pilot, app)
        progress = rendered(screen.query_one("#progress"))
    assert "eta" not in progress and "img/s" not in progress, progress


def test_slow_speeds_show_one_decimal():
    assert formatting.speed(0.42) == "0.4 img/s"
    assert formatting.speed(9.94) == "9.9 img/s" and formatting.speed(10.0) == "10 img/s"
    assert formatting.speed(123.4) == "123 img/s"


def test_elapsed_is_the_sum_over_attempts_and_started_is_the_first_start(tmp_path):
    from yolotui.placement.launcher import launch
    from yolotui.runs.status import elapsed_seconds

    run_dir = tmp_path / "runs" / "resumed"
    run_dir.mkdir(parents=True)
    first = time.time() - 10_000
    # An earlier life: two attempts of 100 s and 50 s, then the run lay stopped for hours.
    atomic_write_json(status_path(run_dir), RunStatus(
        name="resumed", run_dir=str(run_dir), state="stopped", started=first, ended=first + 400,
        attempts=[{"attempt": 1, "started": first, "ended": first + 100},
                  {"attempt": 2, "started": first + 300, "ended": first + 350}]).to_dict())
    launch(run_dir, ["sleep", "30"], name="resumed", max_attempts=1)
    wait_for(lambda: (read_status(run_dir).attempts or [None])[0])
    try:
        status = read_status(run_dir)
        assert status.started == pytest.approx(first)  # the first start, not the resume
        assert status.earlier_seconds == pytest.approx(150.0)
        spent = elapsed_seconds(status, time.time(), live=True)
        assert 150.0 <= spent < 150.0 + 60, spent  # not the 10 000 s since the first start
    finally:
        kill_run(run_dir)


# -- 7: GPU panel reason not cut off, CPU counter primed, `status` says what was updated ----------------------
class _NoGpuSampler(FakeSampler):
    REASON = "no NVIDIA GPU: the NVIDIA driver library (libnvidia-ml.so) is not installed"

    def sample(self) -> FakeSnapshot:
        self.calls += 1
        return FakeSnapshot(1.0, False, self.REASON, [], FakeHost())


@anyio
async def test_no_gpu_reason_is_not_cut_off_at_120_columns(tmp_path):
    run = make_run(tmp_path / "runs", "cpu-run", state="finished", epochs=3, done_epochs=3)
    app = make_app(run.path, sampler=_NoGpuSampler())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_dashboard(pilot, app)
        panel = screen.query_one("#gpu")
        assert await wait_until(pilot, lambda: "libnvidia" in rendered(panel))
        width = panel.content_size.width
        text = rendered(panel)
    lines = text.splitlines()
    assert all(len(line) <= width for line in lines), (width, lines)
    assert " ".join(line.strip() for line in lines).startswith(_NoGpuSampler.REASON)


def test_first_cpu_reading_is_primed(monkeypatch):
    import psutil

    from yolotui.telemetry import host

    calls = []

    def fake_cpu_percent(interval=None):
        calls.append(interval)
        return 0.0 if interval is None and len(calls) == 1 else 73.0  # psutil's unprimed first answer is 0.0

    monkeypatch.setattr(psutil, "cpu_percent", fake_cpu_percent)
    monkeypatch.setattr(host, "_cpu_primed", False, raising=False)
    assert host.read_host().cpu_pct == 73.0
    assert host.read_host().cpu_pct == 73.0 and calls[-1] is None  # later readings never block


def test_status_of_a_live_run_says_what_was_updated(tmp_path, capsys, monkeypatch):
    from yolotui.commands import status as status_command
    from yolotui.runs.events import BATCHES_FILE

    written = time.time()
    with monkeypatch.context() as clock:  # the run's events were written 10 s ago; its newest batch 3 s ago
        clock.setattr(time, "time", lambda: written - 10)
        run = make_run(tmp_path / "runs", "live", state="running", epochs=10, done_epochs=2, hold_lock=True)
    try:
        with open(run.path / BATCHES_FILE, "a") as handle:
            handle.write(json.dumps({"ts": time.time() - 3, "type": "batch", "attempt": 1, "epoch": 2,
                                     "epochs": 10, "batch": 1, "batches": 20}) + "\n")
        status_command.run(argparse.Namespace(run=str(run.path), json=False))
    finally:
        run.release()
    out = capsys.readouterr().out
    # what is fresh: the trainer's last batch (and epoch) event, not when the supervisor last wrote status.json
    assert re.search(r"last batch event [34]s ago \(epoch 3 of 10, batch 1/20\)", out), out
    assert "status.json" not in out
    assert "epochs     2/10 done (epoch 3 of 10: batch 1/20)" in out


# -- 10: no "interrupted" while a deliberate resume starts its supervisor ------------------------------------
def test_a_queued_run_whose_supervisor_is_starting_is_not_interrupted(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # What the launcher writes a moment before the new supervisor takes the lock.
    atomic_write_json(status_path(run_dir), {**RunStatus(name="run", state="queued", launching=True).to_dict(),
                                             "updated": time.time()})
    assert effective_state(run_dir) == "queued"
    from yolotui.runs.summary import summarize

    assert summarize(run_dir).state == "queued"
    # Its supervisor took the lock and died before writing its own status: interrupted, not starting.
    time.sleep(0.05)
    os.close(lock.acquire(run_dir))
    assert effective_state(run_dir) == "interrupted"
    # A supervisor's own queued status (it waited in a queue) without the lock: it died, whatever the age.
    atomic_write_json(status_path(run_dir), {**RunStatus(name="run", state="queued", supervisor_pid=4242, launching=True).to_dict(),
                                             "updated": time.time()})
    assert effective_state(run_dir) == "interrupted"
    # A queued status no launcher wrote (nothing is starting) without the lock: interrupted, however fresh.
    atomic_write_json(status_path(run_dir), {**RunStatus(name="run", state="queued").to_dict(),
                                             "updated": time.time()})
    assert effective_state(run_dir) == "interrupted"
    # A queued status that stayed without a supervisor is still reported as interrupted.
    atomic_write_json(status_path(run_dir), {**RunStatus(name="run", state="queued", launching=True).to_dict(),
                                             "updated": time.time() - 600})
    assert effective_state(run_dir) == "interrupted"


@anyio
async def test_no_interrupted_toast_during_a_resume_from_the_tui(tmp_path):
    run = make_run(tmp_path / "runs", "resumed", state="stopped", epochs=10, done_epochs=2)
    app = make_app(None)
    async with app.run_test(size=(100, 30)) as pilot:
        assert await wait_until(pilot, lambda: app.home is not None and app.home.loaded)
        toasts: list[str] = []
        real_notify = app.notify
        app.notify = lambda message, **kw: (toasts.append(f"{kw.get('title')}: {message}"),  # type: ignore
                                            real_notify(message, **kw))
        # The resume's launcher rewrites status.json as queued; the supervisor has not taken the lock yet.
        atomic_write_json(status_path(run.path), {**RunStatus(name="resumed", state="queued", launching=True).to_dict(),
                                                  "updated": time.time()})
        count = app.home.load_count
        app.home.request_load()
        assert await wait_until(pilot, lambda: app.home.load_count > count)
    assert not [t for t in toasts if "interrupted" in t], toasts


# -- 11: a shipped config the user chose is a note, not a warning --------------------------------------------
def test_choosing_a_shipped_model_is_not_a_warning(tmp_path):
    from yolotui.config import default_options, validate_options
    from yolotui.datasets import make_demo_dataset

    data = make_demo_dataset(tmp_path / "data", n_train=2, n_val=1, img=64, seed=0)
    notes: list[str] = []
    _, warnings = validate_options(default_options(cfg="gelan-t", data=str(data), hyp="hyp.short-run.yaml",
                                                   device="cpu"), notes=notes)
    assert not [w for w in warnings if "shipped" in w], warnings
    assert any("gelan-t.yaml" in note for note in notes), notes


# -- 12: val defaults to the checkpoint's training image size ------------------------------------------------
def test_val_defaults_to_the_image_size_the_checkpoint_was_trained_at(tmp_path, capsys):
    import torch
    from trainkit import TINY_CFG, make_data

    from yolotui.cli import main
    from yolotui.engine.model import build_model

    torch.manual_seed(0)
    data = make_data(tmp_path / "data", n_train=1, n_val=2, img=64)
    model = build_model(dict(TINY_CFG), nc=5)
    weights = tmp_path / "tiny.pt"
    torch.save({"format": "yolotui-1", "model_yaml": model.yaml, "nc": 5, "names": [str(i) for i in range(5)],
                "epoch": 3, "epochs": 3, "step": 0, "model": model.state_dict(), "ema": model.state_dict(),
                "best_fitness": 0.0, "opt": {"imgsz": 96}}, weights)
    assert main(["val", "--weights", str(weights), "--data", str(data), "--device", "cpu", "--workers", "0",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["imgsz"] == 96  # was 640 whatever the training size


# -- 13: `d` on the runs table removes an ended run after a confirmation; live runs are refused --------------
@anyio
async def test_d_removes_the_highlighted_ended_run_after_confirmation(tmp_path):
    from yolotui.runs import index
    from yolotui.tui.screens.confirm_remove import ConfirmRemoveScreen

    make_run(tmp_path / "runs", "old-run", state="finished", epochs=3, done_epochs=3)
    app = make_app(None)
    async with app.run_test(size=(100, 30)) as pilot:
        assert await wait_until(pilot, lambda: app.home is not None and app.home.loaded and app.home.rows)
        await pilot.press("d")
        assert await wait_until(pilot, lambda: isinstance(app.screen, ConfirmRemoveScreen))
        assert "old-run" in rendered(app.screen.query_one("#remove-question"))
        await pilot.press("y")
        assert await wait_until(pilot, lambda: not isinstance(app.screen, ConfirmRemoveScreen))
        assert await wait_until(pilot, lambda: not app.home.rows)
    assert [e.name for e in index.entries(check_exists=False)] == []
    assert (tmp_path / "runs" / "old-run").is_dir(), "without D the folder stays"


@anyio
async def test_d_refuses_a_live_run_with_a_clear_message(tmp_path):
    from yolotui.tui.screens.confirm_remove import ConfirmRemoveScreen

    run = make_run(tmp_path / "runs", "busy", state="running", epochs=3, done_epochs=1, hold_lock=True)
    app = make_app(None)
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            assert await wait_until(pilot, lambda: app.home is not None and app.home.loaded and app.home.rows)
            toasts: list[str] = []
            real_notify = app.notify
            app.notify = lambda message, **kw: (toasts.append(message), real_notify(message, **kw))  # type: ignore
            await pilot.press("d")
            assert await wait_until(pilot, lambda: toasts)
            assert not isinstance(app.screen, ConfirmRemoveScreen)
        assert "busy is running" in toasts[0] and "stop it first" in toasts[0]
        assert (tmp_path / "runs" / "busy").is_dir()
    finally:
        run.release()


# -- 14: wizards check as you type, the fix line follows, Tab reaches the file, q says goodbye, sort, palette --
@anyio
async def test_wizard_checks_epochs_as_typed_and_the_fix_line_clears(tmp_path, monkeypatch):
    from textual.widgets import Input, Static
    from wizard_kit import CaptureLauncher, HostApp, make_data, write_tiny_cfg

    from yolotui.tui.screens.wizard_new_run import NewRunWizard

    monkeypatch.chdir(tmp_path)
    make_data(tmp_path / "data")
    write_tiny_cfg(tmp_path)
    app = HostApp(lambda: NewRunWizard(CaptureLauncher(tmp_path / "runs" / "train" / "exp"),
                                       sampler=FakeSampler(), values={"data": "data/data.yaml"}))
    async with app.run_test(size=(100, 40)) as pilot:
        wizard = app.wizard
        assert await wait_until(pilot, lambda: wizard.gpu_indices is not None and wizard.data_facts is not None)
        error = wizard.query_one("#epochs-error", Static)
        wizard.query_one("#epochs", Input).value = "0"
        assert await wait_until(pilot, lambda: "epochs" in rendered(error) and "at least 1" in rendered(error))
        wizard.query_one("#batch", Input).value = "x"
        await pilot.press("ctrl+s")
        status = wizard.query_one("#status", Static)
        assert await wait_until(pilot, lambda: "2 fields to fix" in rendered(status))
        wizard.query_one("#batch", Input).value = "8"
        assert await wait_until(pilot, lambda: "1 field to fix" in rendered(status))
        wizard.query_one("#epochs", Input).value = "3"
        assert await wait_until(pilot, lambda: rendered(status).strip() == "")
        assert rendered(error).strip() == ""


def test_one_tab_completes_a_path_to_the_file(tmp_path):
    from yolotui.datasets import make_demo_dataset
    from yolotui.tui.widgets.path_input import complete_path

    make_demo_dataset(tmp_path / "sets" / "shapes", n_train=1, n_val=1, img=32, seed=0)
    typed = str(tmp_path / "se")
    assert complete_path(typed, (".yaml", ".yml")) == str(tmp_path / "sets" / "shapes" / "data.yaml")


@anyio
async def test_quitting_says_the_run_goes_on_and_how_to_come_back(tmp_path):
    run = make_run(tmp_path / "runs", "going", state="running", epochs=10, done_epochs=2, hold_lock=True)
    try:
        app = make_app(run.path)
        async with app.run_test(size=(100, 30)) as pilot:
            await open_dashboard(pilot, app)
            await pilot.press("q")
            assert await wait_until(pilot, lambda: app.farewell)
        assert "going goes on in the background" in app.farewell
        assert "yolotui attach going" in app.farewell
    finally:
        run.release()


@anyio
async def test_quitting_a_finished_run_does_not_say_it_goes_on(tmp_path):
    run = make_run(tmp_path / "runs", "done", state="finished", epochs=3, done_epochs=3)
    app = make_app(run.path)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_dashboard(pilot, app)
        await pilot.press("q")
        assert await wait_until(pilot, lambda: app.farewell)
    assert "goes on" not in app.farewell and "done finished" in app.farewell
    assert "yolotui attach done" in app.farewell


@anyio
async def test_sorting_keeps_the_highlight_on_the_same_run(tmp_path):
    from textual.widgets import DataTable

    for index, name in enumerate(("alpha", "bravo", "charlie")):
        make_run(tmp_path / "runs", name, state="finished", epochs=3, done_epochs=3,
                 started=FIXED_NOW - 1000 * (index + 1))
    app = make_app(None)
    async with app.run_test(size=(100, 30)) as pilot:
        home = app.home
        assert await wait_until(pilot, lambda: home is not None and home.loaded and len(home.rows) == 3)
        table = home.query_one("#runs", DataTable)
        await pilot.press("down")  # newest first: alpha, bravo, charlie -> bravo highlighted
        assert await wait_until(pilot, lambda: Path(home.selected_path()).name == "bravo")
        for _ in range(len(home.rows) + 2):  # every column once, and a reversal
            await pilot.press("s")
            await pilot.pause()
            assert Path(home.selected_path()).name == "bravo", home.sort_column
        home.set_sort(0)
        home.set_sort(0)  # name, reversed: charlie, bravo, alpha
        await pilot.pause()
        assert Path(home.selected_path()).name == "bravo" and table.cursor_row == 1


@anyio
async def test_palette_has_no_duplicates_and_one_run_is_singular(tmp_path):
    from textual.widgets import Static

    make_run(tmp_path / "runs", "only", state="finished", epochs=3, done_epochs=3)
    app = make_app(None)
    async with app.run_test(size=(100, 30)) as pilot:
        assert await wait_until(pilot, lambda: app.home is not None and app.home.loaded and app.home.rows)
        note = rendered(app.home.query_one("#home-message", Static))
        make_run(tmp_path / "other", "only", state="finished", epochs=3, done_epochs=3)  # the same name again
        app.home.request_load()
        assert await wait_until(pilot, lambda: len(app.home.rows) == 2)
        titles = [command.title for command in app.get_system_commands(app.screen)]
    assert note.startswith("1 run,"), note
    assert len(titles) == len(set(titles)), sorted(t for t in titles if titles.count(t) > 1)
    assert "Help: keys" in titles and "Keys" not in titles  # one entry for the keys, not two
    assert len([t for t in titles if t.startswith("Open run only")]) == 2


@anyio
async def test_finetune_wizard_checks_epochs_and_lr_scale_as_typed(tmp_path, monkeypatch):
    from textual.widgets import Input, Static
    from wizard_kit import CaptureLauncher, HostApp, data_with_classes, make_data, make_source_run

    from yolotui.tui.screens.wizard_finetune import FinetuneWizard

    monkeypatch.chdir(tmp_path)
    data = make_data(tmp_path / "data")
    data_with_classes(data, 3, "three.yaml")
    make_source_run(tmp_path / "runs" / "src", nc=3)
    app = HostApp(lambda: FinetuneWizard("runs/src", CaptureLauncher(), values={"data": "data/three.yaml"}))
    async with app.run_test(size=(100, 40)) as pilot:
        wizard = app.wizard
        assert await wait_until(pilot, lambda: {"source", "data"} <= set(wizard.checked), timeout=15)
        error = wizard.query_one("#epochs-error", Static)
        wizard.query_one("#epochs", Input).value = "zero"
        assert await wait_until(pilot, lambda: "epochs" in rendered(error))  # no Ctrl+S pressed
        wizard.query_one("#epochs", Input).value = "5"
        assert await wait_until(pilot, lambda: rendered(error).strip() == "")
        wizard.query_one("#lr-scale", Input).value = "-1"
        assert await wait_until(pilot, lambda: "lr scale" in rendered(wizard.query_one("#lr-scale-error", Static)))
    assert wizard.launched == []
