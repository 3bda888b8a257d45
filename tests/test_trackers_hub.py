"""The trainer's tracker hub, with stand-in trackers: a failure is a warning event and a count in run.yaml, the
tracker is reopened at the next epoch and catches up with every epoch it missed; a missing package is said once;
a stuck network tracker never holds the trainer past its bound; only every N-th batch reaches TensorBoard."""

from __future__ import annotations

import threading

import torch
from trackerkit import run_yaml, write_run_yaml

from yolotui.engine.trackers import hub as hub_module
from yolotui.engine.trackers.base import FINISHED, STOPPED, MissingPackage, Tracker, TrackerContext
from yolotui.engine.trackers.hub import TrackerHub
from yolotui.runs.trackers import WARNING_KIND, read_records, settings_from_entry, summary_lines


class StandIn(Tracker):
    """Fails its first `fail_opens` opens; remembers what it was sent."""

    name = "mlflow"

    def __init__(self, fail_opens: int = 0, error: Exception | None = None, background: bool = False) -> None:
        self.fail_opens, self.error, self.background = fail_opens, error, background
        self.opens, self.epochs, self.batches, self.ended = 0, [], [], None

    def open(self, ctx):
        self.opens += 1
        if self.fail_opens:
            self.fail_opens -= 1
            raise self.error or ConnectionError("server down")
        return set()

    def log_batch(self, step, scalars):
        self.batches.append(step)

    def log_epoch(self, epoch, event):
        self.epochs.append(epoch)

    def finish(self, outcome, artefacts):
        self.ended = (outcome, sorted(p.name for p in artefacts))


def _hub(tmp_path, tracker, entry=None):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_run_yaml(run_dir, entry or {"tensorboard": False, "mlflow": {"uri": "http://x"}})
    ctx = TrackerContext(run_dir=run_dir, run_name="run", settings=settings_from_entry(entry or {}), opt={}, hyp={},
                         epochs=3, batches=4)
    events = []
    return TrackerHub(ctx, [tracker], lambda type_, **f: events.append({"type": type_, **f})), events, run_dir


def _epoch(n):
    return {"type": "epoch", "epoch": n, "losses": {"box": 1.0, "cls": 1.0, "dfl": 1.0},
            "metrics": {"P": 0.1, "R": 0.2, "mAP50": 0.3, "mAP50-95": 0.2}, "fitness": 0.21, "lr": [0.01, 0.01, 0.01]}


def test_a_failing_tracker_warns_is_retried_each_epoch_and_catches_up(tmp_path):
    tracker = StandIn(fail_opens=2)
    hub, events, run_dir = _hub(tmp_path, tracker)
    hub.start([])  # fails
    hub.epoch(_epoch(0))  # the retry fails too
    assert tracker.epochs == [] and len(events) == 2
    hub.epoch(_epoch(1))  # works: catches up with epoch 0
    hub.epoch(_epoch(2))
    (run_dir / "best.pt").write_bytes(b"x")
    (run_dir / "last.pt").write_bytes(b"y")
    hub.finish(run_dir / "best.pt", run_dir / "last.pt")
    assert tracker.opens == 3 and tracker.epochs == [0, 1, 2]
    assert tracker.ended == (FINISHED, ["best.pt", "last.pt"])
    assert [e["kind"] for e in events] == [WARNING_KIND, WARNING_KIND]
    assert all(e["type"] == "warning" and "server down; retrying at the next epoch" in e["message"] for e in events)
    record = read_records(run_dir)["mlflow"]
    assert record["failures"] == 2 and record["ok"] is True and "server down" in record["last_error"]
    assert any("2 failures, recovered" in line for line in summary_lines(run_dir))
    assert run_yaml(run_dir)["command"]  # the rest of run.yaml is kept


def test_earlier_epochs_of_a_resumed_run_are_sent_to_a_tracker_that_lacks_them(tmp_path):
    tracker = StandIn()
    hub, events, _ = _hub(tmp_path, tracker)
    hub.start([_epoch(0), _epoch(1)])  # the run's epochs before this process (events.jsonl)
    hub.epoch(_epoch(2))
    hub.close(STOPPED)
    assert tracker.epochs == [0, 1, 2] and tracker.ended == (STOPPED, []) and events == []


def test_a_missing_package_is_said_once_and_not_retried(tmp_path):
    tracker = StandIn(fail_opens=5, error=MissingPackage("mlflow is not installed: pip install 'yolotui[mlflow]'"))
    hub, events, _ = _hub(tmp_path, tracker)
    hub.start([])
    hub.epoch(_epoch(0))
    hub.epoch(_epoch(1))
    hub.finish(tmp_path / "none.pt", tmp_path / "none.pt")
    assert tracker.opens == 1 and len(events) == 1
    assert events[0]["message"] == "mlflow: mlflow is not installed: pip install 'yolotui[mlflow]'"


def test_a_stuck_background_tracker_never_holds_the_trainer_past_its_bound(tmp_path, monkeypatch):
    release = threading.Event()

    class Stuck(StandIn):
        def log_epoch(self, epoch, event):
            release.wait(30)

    tracker = Stuck(background=True)
    hub, events, _ = _hub(tmp_path, tracker)
    monkeypatch.setattr(hub_module, "CLOSE_WAIT_S", 0.3)
    hub.start([])
    hub.epoch(_epoch(0))  # returns at once: the tracker's own thread is stuck, not the trainer
    hub.close(STOPPED)
    try:
        assert [e["message"] for e in events] == ["mlflow: still busy after 0 s at the end; left behind"]
    finally:
        release.set()


def test_only_every_nth_batch_reaches_a_tracker_that_wants_batches(tmp_path):
    tracker = StandIn()
    tracker.wants_batches = True
    hub, _, _ = _hub(tmp_path, tracker, {"tensorboard": False, "batch_every": 3, "mlflow": {}})
    hub.start([])
    for iteration in range(10):
        hub.batch(iteration, torch.ones(3) * (iteration + 1), iteration + 1, 0.01)
    assert tracker.batches == [2, 5, 8]


def test_default_tensorboard_without_its_package_is_left_out_quietly_and_an_asked_one_is_not(tmp_path, monkeypatch):
    from yolotui.runs import trackers as tracker_settings

    monkeypatch.setattr(tracker_settings, "installed", lambda name: False)
    default = settings_from_entry(None)  # run.yaml names no trackers: TensorBoard on by default only
    assert default.tensorboard_skipped() and default.enabled() == []
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_run_yaml(run_dir, {})
    assert summary_lines(run_dir) == []  # `status` names no failing tracker
    with_mlflow = settings_from_entry({"mlflow": {"uri": None}})
    assert with_mlflow.enabled() == ["mlflow"]
    asked = settings_from_entry({"tensorboard": True})  # asked for in run.yaml: kept, so its absence is reported
    assert not asked.tensorboard_skipped() and asked.enabled() == ["tensorboard"]
    monkeypatch.setattr(tracker_settings, "installed", lambda name: True)
    assert settings_from_entry(None).enabled() == ["tensorboard"]
    assert settings_from_entry({"tensorboard": False}).enabled() == []
