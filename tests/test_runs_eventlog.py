"""The events layout of long runs: one writer, two streams (events.jsonl and the rotated batch segments), the
bounded readers, the rewind of a resume, old single-stream folders, the shim kit's events, capped logs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from yolotui.runs import events as ev
from yolotui.runs.eventlog import EventFollower, RunFollower, epoch_events, recent_events
from yolotui.runs.events import EventWriter, read_events, rewind_run
from yolotui.runs.logcap import cap_log, previous_path, tail_text
from yolotui.runs.summary import summarize
from yolotui.tui.runview import RunReader

ROOT = Path(__file__).resolve().parent.parent / "yolotui"


def _line(**event) -> str:
    return json.dumps(event, separators=(",", ":")) + "\n"


def write_run(run_dir: Path, epochs: int, batches: int, old_layout: bool, crash_at: int | None = None) -> None:
    """A run's events as the engine writes them: per epoch its batch events, an epoch event, a checkpoint.
    `old_layout`: everything in events.jsonl, as yolotui wrote it before the batch stream had its own file."""
    run_dir.mkdir(parents=True, exist_ok=True)
    main, side = [], []
    ts = 1000.0
    main.append(_line(ts=ts, type="start", attempt=1, epochs=epochs))
    for epoch in range(epochs):
        for b in range(1, batches + 1):
            ts += 0.5
            (main if old_layout else side).append(_line(
                ts=ts, type="batch", attempt=1, epoch=epoch, epochs=epochs, batch=b, batches=batches,
                losses={"box": 1.0, "cls": 1.0, "dfl": 1.0}, lr=0.01, imgs_per_s=100.0 + b))
            if crash_at is not None and epoch == crash_at and b == batches // 2:
                break
        else:
            ts += 1.0
            main.append(_line(ts=ts, type="epoch", attempt=1, epoch=epoch, epochs=epochs,
                              losses={"box": 1.0 / (epoch + 1), "cls": 0.5, "dfl": 0.25},
                              metrics={"P": 0.1, "R": 0.2, "mAP50": 0.3, "mAP50-95": 0.01 * epoch}))
            main.append(_line(ts=ts + 0.1, type="checkpoint", attempt=1, epoch=epoch + 1, step=0))
            continue
        main.append(_line(ts=ts + 0.2, type="error", attempt=1, kind="crash", message="boom"))
        break
    (run_dir / "events.jsonl").write_text("".join(main))
    if side:
        (run_dir / "batches.jsonl").write_text("".join(side))


class CountingOpen:
    """An `open` for the rewind's `opener` that counts the bytes read through it."""

    def __init__(self) -> None:
        self.read = 0

    def __call__(self, path, mode="rb"):
        counter, raw = self, open(path, mode)

        class Counted:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                raw.close()

            def seek(self, *args):
                return raw.seek(*args)

            def read(self, n=-1):
                data = raw.read(n)
                counter.read += len(data)
                return data

        return Counted()


# --- the writer -------------------------------------------------------------------------------------------

def test_batches_go_to_their_own_stream_which_rotates_at_its_cap(tmp_path):
    writer = EventWriter(tmp_path / "events.jsonl", attempt=2, segment_bytes=2000)
    writer.emit("start", epochs=3)
    for b in range(60):
        writer.emit("batch", epoch=0, epochs=3, batch=b + 1, batches=60)
    writer.emit("epoch", epoch=0, epochs=3)
    assert [e["type"] for e in read_events(tmp_path / "events.jsonl")] == ["start", "epoch"]
    current, previous = read_events(tmp_path / "batches.jsonl"), read_events(tmp_path / "batches.1.jsonl")
    assert previous and all(e["type"] == "batch" and e["attempt"] == 2 for e in previous + current)
    assert (tmp_path / "batches.jsonl").stat().st_size < 2000 and (tmp_path / "batches.1.jsonl").stat().st_size >= 2000
    assert (previous + current)[-1]["batch"] == 60  # the newest is always kept
    assert [e["batch"] for e in previous + current] == list(range(61 - len(previous + current), 61))


# --- old and new layouts read alike ---------------------------------------------------------------------------

@pytest.mark.parametrize("old_layout", [True, False])
def test_dashboard_and_summary_show_every_epoch_and_the_newest_batch(tmp_path, old_layout):
    run_dir = tmp_path / "run"
    write_run(run_dir, epochs=40, batches=50, old_layout=old_layout, crash_at=39)
    view = RunReader(run_dir).refresh()
    assert [p.epoch for p in view.points] == list(range(39))
    assert view.points[-1].map == pytest.approx(0.38) and view.points[0].box == 1.0
    assert (view.epoch, view.batch, view.batches, view.epochs) == (39, 25, 50, 40)
    assert view.imgs_per_s is not None and view.last_problem == "error: crash boom"
    summary = summarize(run_dir)
    assert (summary.epoch, summary.epochs, summary.batch, summary.batches) == (39, 40, 25, 50)
    assert [e["epoch"] for e in epoch_events(run_dir / "events.jsonl", before=5)] == [0, 1, 2, 3, 4]
    assert recent_events(run_dir)[-1]["type"] == "error"


def test_a_followers_backlog_hands_over_only_the_newest_batches(tmp_path):
    write_run(tmp_path, epochs=30, batches=100, old_layout=True)
    follower = EventFollower(tmp_path / "events.jsonl", keep_batches=10)
    events = follower.poll()
    kinds = [e["type"] for e in events]
    assert kinds.count("epoch") == 30 and kinds.count("batch") == 10
    assert events[-3]["type"] == "batch" and events[-3]["batch"] == 100  # in place among the others
    assert follower.offset == (tmp_path / "events.jsonl").stat().st_size


def test_the_run_follower_starts_at_the_batch_tail_and_follows_a_rotation(tmp_path):
    writer = EventWriter(tmp_path / "events.jsonl", segment_bytes=4000)
    writer.emit("start")
    for b in range(200):
        writer.emit("batch", epoch=0, batch=b + 1, batches=400)
    follower = RunFollower(tmp_path, batch_tail=1000)
    first = follower.poll()
    assert first[0]["type"] == "start" and 0 < sum(e["type"] == "batch" for e in first) < 20
    assert first[-1]["batch"] == 200
    seen = []
    for b in range(200, 260):  # crosses a rotation
        writer.emit("batch", epoch=0, batch=b + 1, batches=400)
        seen += [e["batch"] for e in follower.poll()]
    assert seen[-1] == 260 and seen == sorted(seen)
    assert (tmp_path / "batches.1.jsonl").exists()
    (tmp_path / "batches.jsonl").write_text("")  # as just after a rotation
    reopened = [e for e in RunFollower(tmp_path, batch_tail=1000).poll() if e["type"] == "batch"]
    assert reopened and reopened[-1]["batch"] == max(e["batch"] for e in read_events(tmp_path / "batches.1.jsonl"))


def test_the_stall_watch_sees_the_attempts_events_in_both_streams(tmp_path):
    from yolotui.supervisor.watchdog import StallWatch, WatchdogSettings

    writer = EventWriter(tmp_path / "events.jsonl")
    writer.emit("start")
    writer.emit("batch", epoch=0, batch=1, batches=9)  # an earlier attempt's
    offset = (tmp_path / "events.jsonl").stat().st_size
    watch = StallWatch(WatchdogSettings(), tmp_path / "events.jsonl", offset, tmp_path / "train.log", 0,
                       uses_events=True, save_signal=True)
    assert watch.poll() == []
    writer.emit("batch", epoch=0, batch=2, batches=9)
    writer.emit("epoch", epoch=0)
    assert [e["type"] for e in watch.poll()] == ["batch", "epoch"]
    assert [e["batch"] for e in watch.recent_batches] == [2] and watch.kept[-1]["type"] == "epoch"


# --- the rewind of a resume -----------------------------------------------------------------------------------

@pytest.mark.parametrize("old_layout", [True, False])
def test_a_resume_reads_and_rewrites_only_the_tail_past_the_checkpoint(tmp_path, old_layout):
    run_dir = tmp_path / "run"
    write_run(run_dir, epochs=200, batches=60, old_layout=old_layout, crash_at=199)
    sizes = sum(p.stat().st_size for p in run_dir.iterdir())

    def later(event):  # the engine's rule for a checkpoint at (199, 0)
        kind = event.get("type")
        if kind == "batch":
            return (event["epoch"], event["batch"]) > (199, 0)
        if kind in ("epoch", "checkpoint"):
            return event["epoch"] >= 200 if kind == "checkpoint" else event["epoch"] >= 199
        return kind == "done"

    counting = CountingOpen()
    dropped = rewind_run(run_dir / "events.jsonl", later, opener=counting)
    assert dropped == 30  # the half epoch's batch events
    assert counting.read < 3 * ev.REWIND_BLOCK and counting.read * 10 < sizes  # not the history
    kept = [e["type"] for e in read_events(run_dir / "events.jsonl")]
    assert kept[-2:] == ["checkpoint", "error"]  # the crash's error event stays, after the kept history
    assert kept.count("epoch") == 199
    view = RunReader(run_dir).refresh()
    assert len(view.points) == 199 and view.batch == 60 and view.epoch == 198


def test_the_engines_rewind_keeps_a_mid_epoch_checkpoint_and_drops_what_follows(tmp_path):
    from yolotui.engine.train.checkpointing import drop_events_after

    writer = EventWriter(tmp_path / "events.jsonl")
    writer.emit("start")
    for b in range(1, 11):
        writer.emit("batch", epoch=0, batch=b, batches=10)
        if b == 4:
            writer.emit("checkpoint", epoch=0, step=4)
    writer.emit("epoch", epoch=0)
    writer.emit("warning", kind="x", message="kept")
    writer.emit("done")
    assert drop_events_after(tmp_path / "events.jsonl", 0, 4) == 8  # 6 batches, the epoch, done
    assert [e["type"] for e in read_events(tmp_path / "events.jsonl")] == ["start", "checkpoint", "warning"]
    assert [e["batch"] for e in read_events(tmp_path / "batches.jsonl")] == [1, 2, 3, 4]


# --- the shim kit: both shims write the layout the real readers read --------------------------------------------

OFFICIAL = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("shim_under_test", sys.argv[1])
shim = importlib.util.module_from_spec(spec); spec.loader.exec_module(shim)
assert "yolotui" not in sys.modules, "the shim imported yolotui"
reporter = shim.Reporter(sys.argv[2], 1)
reporter.epochs = 2  # what on_train_start reads from the official train()
reporter.events.emit("start", backend="official", epochs=2, config={})

class Imgs:
    shape = (8, 3, 64, 64)

def train(reporter, epoch):
    epochs, nb = 2, 4
    for i in range(nb):
        reporter.on_train_batch_end(None, None, Imgs(), None, None, [0.5, 0.25, 0.125])

for epoch in range(2):
    reporter.on_train_epoch_start()
    train(reporter, epoch)
    reporter.on_fit_epoch_end([0.5, 0.25, 0.125, 0.6, 0.7, 0.4, 0.2 + epoch, 0, 0, 0, 0.01, 0.01, 0.01],
                              epoch, 0.3, 0.3)
reporter.events.emit("batch", epoch=2, epochs=2, batch=1, batches=4)
assert shim._report.drop_events_from(reporter.events.path, 2) == 1
"""

ULTRALYTICS = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("shim_under_test", sys.argv[1])
shim = importlib.util.module_from_spec(spec); spec.loader.exec_module(shim)
assert "yolotui" not in sys.modules, "the shim imported yolotui"
reporter = shim.Reporter(sys.argv[2], 1, {})
reporter.events.emit("start", backend="ultralytics", epochs=2, config={})
for epoch in range(2):
    for b in range(1, 5):
        reporter.events.emit("batch", epoch=epoch, epochs=2, batch=b, batches=4, losses={"box": 0.5}, lr=0.01,
                             imgs_per_s=10.0, gpu_mem_gb=None)
    reporter.events.emit("epoch", epoch=epoch, epochs=2, losses={"box": 0.5, "cls": 0.25, "dfl": 0.125},
                         metrics={"P": 0.6, "R": 0.7, "mAP50": 0.4, "mAP50-95": 0.2 + epoch})
    reporter.events.emit("checkpoint", path="last.pt", epoch=epoch + 1, step=0)
reporter.events.emit("batch", epoch=2, epochs=2, batch=1, batches=4)
assert shim.drop_events_from(reporter.events.path, 2) == 1
"""


@pytest.mark.parametrize(("backend", "script"), [("official", OFFICIAL), ("ultralytics", ULTRALYTICS)])
def test_each_shim_writes_what_yolotuis_readers_read(tmp_path, backend, script):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-I", "-c", textwrap.dedent(script), str(ROOT / "backends" / backend /
                           "shim.py"), str(run_dir)], capture_output=True, text=True, env=env, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert {e["type"] for e in read_events(run_dir / "events.jsonl")} >= {"start", "epoch"}
    assert all(e["type"] == "batch" for e in read_events(run_dir / "batches.jsonl"))
    view = RunReader(run_dir).refresh()
    assert [p.epoch for p in view.points] == [0, 1]
    assert [p.map for p in view.points] == [pytest.approx(0.2), pytest.approx(1.2)]
    assert view.points[0].box == 0.5 and view.points[0].map50 == pytest.approx(0.4)
    assert (view.batch, view.batches, view.epochs) == (4, 4, 2)
    assert summarize(run_dir).epoch == 2


def test_the_kits_failure_classes_are_the_supervisors():
    from yolotui.backends import shimkit
    from yolotui.supervisor import decision

    known = {value for name, value in vars(decision).items() if name.isupper() and isinstance(value, str)}
    assert set(shimkit.FAILURE_CLASSES) <= known
    assert shimkit.classify(RuntimeError("CUDA out of memory"), "RuntimeError: CUDA out of memory") == "oom"
    assert shimkit.classify(RuntimeError("x"), "torch.OutOfMemoryError: DefaultCPUAllocator: not enough") == "crash"
    assert shimkit.classify(AssertionError("File not found: a.yaml"), "AssertionError: File not found") == "data"
    assert shimkit.classify(RuntimeError("Training failed: NaN persisted for 4 epochs"), "x") == "nan"


# --- capped logs --------------------------------------------------------------------------------------------------

def test_a_capped_log_keeps_its_head_and_tail_and_counts_what_was_cut(tmp_path):
    log = tmp_path / "train.log"
    written = b"$ yolotui train --epochs 300\nenv: CUDA_VISIBLE_DEVICES=0\n"
    log.write_bytes(written)
    for round_ in range(3):
        chunk = b"".join(b"round %d line %06d\n" % (round_, i) for i in range(3000))
        with open(log, "ab") as handle:
            handle.write(chunk)
        written += chunk
        assert cap_log(log, cap=20_000, head=64, tail=500)
        assert log.stat().st_size == 0
    kept = previous_path(log).read_bytes()
    assert kept.startswith(b"$ yolotui train --epochs 300\nenv: CUDA_VISIBLE_DEVICES=0\n")
    assert kept.endswith(b"round 2 line 002999\n") and len(kept) < 1000
    mark = next(line for line in kept.splitlines() if line.startswith(b"[yolotui: "))
    cut = int(mark.split()[1])
    assert len(kept) - len(mark) - 1 + cut == len(written)  # every byte is kept or counted
    assert not cap_log(log, cap=20_000)
    with open(log, "ab") as handle:
        handle.write(b"Traceback (most recent call last):\nRuntimeError: CUDA out of memory\n")
    text = tail_text(log, offset=50_000, limit=200)  # the attempt began before the cut
    assert "round 2 line 002999" in text and text.endswith("CUDA out of memory\n")


def test_the_supervisor_holds_both_logs_to_their_caps(tmp_path, monkeypatch):
    from yolotui.runs import logcap

    monkeypatch.setattr(logcap, "TRAIN_LOG_CAP", 1000)
    monkeypatch.setattr(logcap, "SUPERVISOR_LOG_CAP", 500)
    (tmp_path / "train.log").write_text("t\n" * 600)
    (tmp_path / "supervisor.log").write_text("s\n" * 200)
    assert logcap.cap_run_logs(tmp_path) == ["train.log"]
    (tmp_path / "supervisor.log").write_text("s\n" * 300)
    assert logcap.cap_run_logs(tmp_path) == ["supervisor.log"]
    assert (tmp_path / "train.1.log").exists() and (tmp_path / "supervisor.1.log").exists()
    assert logcap.cap_run_logs(tmp_path) == []


def test_the_log_panel_keeps_its_lines_across_a_cut(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    reader = RunReader(tmp_path)
    assert reader.refresh().log_lines[-1] == "line 99"
    assert cap_log(log, cap=100, head=20, tail=50)
    with open(log, "a") as handle:
        handle.write("after the cut\n")
    view = reader.refresh()
    assert not view.log_reset and view.new_log_lines == ["after the cut"]
    assert view.log_lines[-2:] == ["line 99", "after the cut"]


def test_logs_follow_goes_on_across_a_cut(tmp_path, monkeypatch, capsysbinary):
    import argparse

    import yolotui.runs.status as status
    from yolotui.commands import logs

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.yaml").write_text("name: run\n")
    log = run_dir / "train.log"
    log.write_bytes(b"first line\n" + b"x" * 50 + b"\n")

    def step_1():
        with open(log, "ab") as handle:
            handle.write(b"before the cut\n")
        assert cap_log(log, cap=10, head=11, tail=15)

    def step_2():
        with open(log, "ab") as handle:
            handle.write(b"after the cut\n")

    steps = [step_1, step_2]

    def live(run_dir, *args, **kwargs):
        if steps:
            steps.pop(0)()
            return "running"
        return "finished"

    monkeypatch.setattr(status, "effective_state", live)
    args = argparse.Namespace(run=str(run_dir), follow=True, tail=0, raw=True, level=None, interval=0.0)
    assert logs.run(args) == 0
    assert capsysbinary.readouterr().out == b"after the cut\n"
    args = argparse.Namespace(run=str(run_dir), follow=False, tail=None, raw=True, level=None, interval=0.0)
    logs.run(args)
    out = capsysbinary.readouterr().out
    assert out.startswith(b"first line\n[yolotui: ") and out.endswith(b"before the cut\nafter the cut\n")


def test_tail_window_starts_at_a_line_and_says_where(tmp_path):
    from yolotui.runs.tailread import tail_window

    path = tmp_path / "events.jsonl"
    path.write_bytes(b"aaaa\nbbbb\ncccc\n")
    assert tail_window(path, 100) == (b"aaaa\nbbbb\ncccc\n", 0)
    assert tail_window(path, 7) == (b"cccc\n", 10)  # "bb\n" is the partial line dropped
    assert tail_window(path, 5) == (b"cccc\n", 10)  # the window holds a whole line but no earlier newline
    path.write_bytes(b"x" * 50)
    assert tail_window(path, 10) == (b"x" * 10, 40)  # one long partial line: kept (a \r-only progress log)
    assert tail_window(tmp_path / "missing", 10) == (b"", 0)
