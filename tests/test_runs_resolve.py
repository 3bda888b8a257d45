"""Turning a run name or path into a run folder."""

from __future__ import annotations

import pytest

from yolotui.errors import UserError
from yolotui.runs import index
from yolotui.runs.resolve import resolve_run
from yolotui.runs.status import RunStatus, write_status
from yolotui.runs.store import create_run_dir


def make_run(project, name):
    run_dir = create_run_dir(project, name)
    write_status(run_dir, RunStatus(name=run_dir.name, state="finished"))
    index.add(run_dir, run_dir.name)
    return run_dir


def test_path_exact_name_and_unique_suffix(tmp_path, monkeypatch):
    exp = make_run(tmp_path / "runs" / "exec", "exp")
    exp2 = make_run(tmp_path / "runs" / "exec", "exp")
    yolo = make_run(tmp_path / "runs" / "train", "yolov9-s")
    monkeypatch.chdir(tmp_path)
    assert resolve_run(str(exp2)) == exp2
    assert resolve_run("runs/exec/exp") == exp
    assert resolve_run("exp") == exp
    assert resolve_run("exp2") == exp2
    assert resolve_run("v9-s") == yolo
    assert resolve_run("train/yolov9-s") == yolo


def test_unknown_run_names_close_matches(tmp_path):
    make_run(tmp_path, "yolov9-s")
    make_run(tmp_path, "yolov9-c")
    with pytest.raises(UserError, match=r"unknown run 'yolov9-x'; did you mean ") as err:
        resolve_run("yolov9-x")
    assert "yolov9-c" in str(err.value) and "yolov9-s" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(UserError, match="see `yolotui ls`"):
        resolve_run("zzzzzz")


def test_ambiguous_names_and_non_run_folders_are_refused(tmp_path, monkeypatch):
    make_run(tmp_path / "a", "exp")
    make_run(tmp_path / "b", "exp")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match="matches 2 runs"):
        resolve_run("exp")
    (tmp_path / "plain").mkdir()
    with pytest.raises(UserError, match="not a yolotui run"):
        resolve_run("./plain")
    with pytest.raises(UserError, match="no run folder"):
        resolve_run("./missing/run")
