"""Run folders, the index, status.json under concurrent rewrites, and torn events.jsonl lines."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from yolotui.errors import UserError
from yolotui.runs import index
from yolotui.runs.eventlog import EventFollower
from yolotui.runs.events import EventWriter, read_events
from yolotui.runs.status import RunStatus, read_status, write_status
from yolotui.runs.store import check_writable, create_run_dir, validate_name


def test_official_numbering_exp_exp2_exp3(tmp_path):
    project = tmp_path / "runs" / "exec"
    names = [create_run_dir(project, "exp").name for _ in range(3)]
    assert names == ["exp", "exp2", "exp3"]
    assert create_run_dir(project, "exp", exist_ok=True) == (project / "exp").resolve()
    assert (project / "exp3" / "weights").is_dir()


@pytest.mark.parametrize(("name", "reason"), [
    ("a/b", "path separator"), ("..", "'..'"), ("x..y", "'..'"), ("bad\x1bname", "control characters"),
    ("tab\tname", "control characters"), ("", "empty"),
])
def test_bad_names_are_refused_with_the_reason(tmp_path, name, reason):
    with pytest.raises(UserError, match=reason):
        validate_name(name)
    with pytest.raises(UserError):
        create_run_dir(tmp_path, name)
    assert list(tmp_path.iterdir()) == []


def test_unwritable_project_folder_is_refused(tmp_path):
    if os.geteuid() == 0:
        project = "/proc/yolotui-project"  # root ignores permission bits; /proc refuses new files
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        project = str(locked / "proj")
    with pytest.raises(UserError, match="not writable"):
        check_writable(project)
    file_parent = tmp_path / "file"
    file_parent.write_text("x")
    with pytest.raises(UserError, match="not a folder"):
        check_writable(file_parent / "proj")


def test_index_lists_newest_first_and_drops_vanished_folders(tmp_path):
    a = create_run_dir(tmp_path, "a")
    b = create_run_dir(tmp_path, "b")
    index.add(a, "a")
    index.add(b, "b")
    index.add(a, "a")  # re-added: one entry per folder, the latest wins
    assert [e.name for e in index.entries()] == ["a", "b"]
    shutil.rmtree(a)
    assert [e.name for e in index.entries()] == ["b"]
    index.remove(b)
    assert index.entries() == []


def test_status_reader_parses_every_read_while_a_writer_rewrites_1000_times(tmp_path, cli_env):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_status(run_dir, RunStatus(name="x", state="running"))
    writer = subprocess.Popen([sys.executable, "-c", (
        "import sys; from pathlib import Path; from yolotui.runs.status import RunStatus, write_status\n"
        "for i in range(1000):\n"
        "    write_status(Path(sys.argv[1]), RunStatus(name='x', state='running', attempt=i,"
        " message='m' * (i % 300), attempts=[{'attempt': j} for j in range(i % 20)]))\n"
    ), str(run_dir)], env=cli_env)
    reads, attempts_seen = 0, set()
    try:
        while writer.poll() is None:
            data = json.loads((run_dir / "status.json").read_text())  # a torn file would raise here
            attempts_seen.add(data["attempt"])
            reads += 1
    finally:
        writer.kill()
        writer.wait()
    assert writer.returncode == 0
    assert reads > 50 and len(attempts_seen) > 10
    assert read_status(run_dir).attempt == 999
    assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]


def test_torn_last_event_line_is_skipped_then_read_once_completed(tmp_path):
    path = tmp_path / "events.jsonl"
    EventWriter(path, attempt=1).emit("start", world_size=1)
    follower = EventFollower(path)
    assert [e["type"] for e in follower.poll()] == ["start"]
    line = json.dumps({"ts": 1.0, "type": "epoch", "attempt": 1, "epoch": 0}) + "\n"
    with open(path, "a") as handle:
        handle.write(line[:17])  # a writer killed (or still writing) mid-line
    assert follower.poll() == []
    assert [e["type"] for e in read_events(path)] == ["start"]
    with open(path, "a") as handle:
        handle.write(line[17:])
    events = follower.poll()
    assert [(e["type"], e["epoch"]) for e in events] == [("epoch", 0)]
    assert follower.poll() == []
    assert [e["type"] for e in read_events(path)] == ["start", "epoch"]
