"""Run summaries for `yolotui ls` and the TUI: facts from the files, derived state, the ended-runs cache."""

from __future__ import annotations

import shutil

from yolotui.runs import index
from yolotui.runs.events import EventWriter
from yolotui.runs.results import append_row
from yolotui.runs.status import RunStatus, write_status
from yolotui.runs.store import create_run_dir
from yolotui.runs.summary import CACHE_FILE, summarize, summarize_all


def make_run(project, name, state="finished", epochs_done=3, planned=10):
    run_dir = create_run_dir(project, name)
    write_status(run_dir, RunStatus(name=run_dir.name, state=state, attempt=1, device="0", started=1.0))
    writer = EventWriter(run_dir / "events.jsonl")
    for epoch in range(epochs_done):
        append_row(run_dir / "results.csv", epoch, [0.1] * 6 + [0.2 + 0.1 * epoch] + [0.0] * 6)
        writer.emit("epoch", epoch=epoch, epochs=planned)
    (run_dir / "weights" / "last.pt").write_bytes(b"x")
    index.add(run_dir, run_dir.name)
    return run_dir


def comparable(summaries):
    return [{k: v for k, v in s.to_dict().items() if k != "checkpoint_age"} for s in summaries]


def test_summary_facts_and_torn_rows(tmp_path):
    run_dir = make_run(tmp_path, "a")
    with open(run_dir / "results.csv", "a") as handle:
        handle.write("                   3,  0.1,  0.")  # a torn row is skipped
    with open(run_dir / "events.jsonl", "a") as handle:
        handle.write('{"type": "epoch", "epochs": 99')  # a torn event too
    summary = summarize(run_dir)
    assert (summary.state, summary.epoch, summary.epochs, summary.device) == ("finished", 3, 10, "0")
    assert abs(summary.best_map - 0.4) < 1e-9
    assert summary.checkpoint_age is not None and summary.checkpoint_age >= 0


def test_live_state_without_a_supervisor_reads_interrupted(tmp_path):
    run_dir = make_run(tmp_path, "a", state="running")
    assert summarize(run_dir).state == "interrupted"


def test_cache_matches_a_fresh_read_and_follows_status_changes(tmp_path, yolotui_home):
    a = make_run(tmp_path, "a")
    b = make_run(tmp_path, "b", state="failed")
    first = summarize_all()
    assert (yolotui_home / CACHE_FILE).exists()
    assert comparable(summarize_all()) == comparable(first) == comparable(summarize_all(use_cache=False))
    # a resume rewrites status.json: the cached entry must not be used any more
    write_status(a, RunStatus(name="a", state="running", attempt=2))
    by_name = {s.name: s for s in summarize_all()}
    assert by_name["a"].state == "interrupted" and by_name["a"].attempt == 2
    shutil.rmtree(b)
    assert [s.name for s in summarize_all()] == ["a"]
