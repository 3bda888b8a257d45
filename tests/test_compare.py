"""`yolotui compare` and jobs.compare: best/final metrics, curves, and only the opt/hyp keys that differ."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from yolotui.cli import main
from yolotui.errors import UserError
from yolotui.jobs.compare import compare_runs
from yolotui.runs import index
from yolotui.runs.results import append_row


def official_like_run(root: Path, name: str, maps: list[tuple[float, float]], opt: dict, hyp: dict) -> Path:
    """A run folder as train_dual.py leaves it: results.csv, opt.yaml, hyp.yaml, weights/ (no status.json)."""
    run = root / name
    (run / "weights").mkdir(parents=True)
    for epoch, (map50, map5095) in enumerate(maps):
        append_row(run / "results.csv", epoch, [1.0, 1.0, 1.0, 0.5, 0.4, map50, map5095, 1.1, 1.1, 1.1,
                                                0.01, 0.01, 0.01])
    (run / "opt.yaml").write_text(yaml.safe_dump({"name": name, "save_dir": str(run), **opt}))
    (run / "hyp.yaml").write_text(yaml.safe_dump(hyp))
    index.add(run, name)
    return run


@pytest.fixture
def two_runs(tmp_path):
    base_opt = {"epochs": 3, "batch_size": 16, "imgsz": 640, "cfg": "yolov9-s"}
    base_hyp = {"lr0": 0.01, "mosaic": 1.0, "mixup": 0.0}
    a = official_like_run(tmp_path / "runs", "lr-high", [(0.20, 0.10), (0.50, 0.30), (0.45, 0.28)],
                          base_opt, base_hyp)
    b = official_like_run(tmp_path / "runs", "lr-low", [(0.10, 0.05), (0.30, 0.20)],
                          {**base_opt, "batch_size": 32}, {**base_hyp, "lr0": 0.001, "close_mosaic": 5})
    return a, b


def test_best_and_final_metrics(two_runs):
    comparison = compare_runs(list(two_runs))
    high, low = comparison.runs
    assert (high.name, low.name) == ("lr-high", "lr-low")
    assert high.best["epoch"] == 1 and high.best["mAP50-95"] == pytest.approx(0.30)  # the peak, not the end
    assert high.final["epoch"] == 2 and high.final["mAP50-95"] == pytest.approx(0.28)
    assert low.best["epoch"] == low.final["epoch"] == 1 and low.epochs_done == 2
    assert [v for _, v in high.curves["mAP50"]] == pytest.approx([0.20, 0.50, 0.45])
    assert "train box" in high.curves and "val dfl" in high.curves


def test_only_differing_keys_are_listed(two_runs):
    diff = {(d.file, d.key): d.values for d in compare_runs(list(two_runs)).diff}
    assert diff == {("opt.yaml", "batch_size"): [16, 32], ("hyp.yaml", "lr0"): [0.01, 0.001],
                    ("hyp.yaml", "close_mosaic"): [None, 5]}  # name/save_dir always differ: not listed


def test_cli_table_and_json(two_runs, capsys):
    assert main(["compare", "lr-high", "lr-low"]) == 0
    out = capsys.readouterr().out
    high_line = next(line for line in out.splitlines() if line.startswith("lr-high"))
    assert "3/3" in high_line and "0.3000" in high_line and "0.2800" in high_line
    assert "hyp.yaml:lr0" in out and "opt.yaml:batch_size" in out and "hyp.yaml:mosaic" not in out
    assert main(["compare", str(two_runs[0]), "lr-low", "--json", "--curves"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in data["runs"]] == ["lr-high", "lr-low"]
    assert data["runs"][0]["curves"]["mAP50-95"][1] == [1, 0.3]


def test_bad_input(two_runs, tmp_path, capsys):
    with pytest.raises(UserError, match="at least two"):
        compare_runs([two_runs[0]])
    with pytest.raises(UserError, match="twice"):
        compare_runs([two_runs[0], two_runs[0]])
    assert main(["compare", "lr-high", "no-such-run"]) == 2
    assert "no-such-run" in capsys.readouterr().err
    (two_runs[1] / "hyp.yaml").write_text("lr0: [unclosed\n")
    comparison = compare_runs(list(two_runs))
    assert any("hyp.yaml" in w and "line" in w for w in comparison.warnings)
    assert all(d.file == "opt.yaml" or d.values[1] is None for d in comparison.diff)
