"""RunReader: what the dashboard derives from a run folder, without Textual."""

from __future__ import annotations

from yolotui.runs.events import EventWriter
from yolotui.tui.runview import RunReader


def test_a_slow_first_epoch_does_not_skew_the_eta(tmp_path):
    run_dir = tmp_path / "run"
    writer = EventWriter(run_dir / "events.jsonl")
    for epoch, seconds in enumerate([200.0, 10.0, 12.0]):
        writer.emit("epoch", epoch=epoch, epochs=10, losses={"box": 1.0, "cls": 1.0, "dfl": 1.0},
                    metrics={"P": 0.1, "R": 0.1, "mAP50": 0.1, "mAP50-95": 0.05}, seconds=seconds)
    view = RunReader(run_dir).refresh()
    assert view.finished_epochs == 3
    assert view.epoch_seconds == 12.0
    assert view.overall_eta() == 7 * 12.0
