"""Robustness through the command line: one winner of two launches, checks before detaching, one-line errors.

Nothing here trains: bad input is refused before anything
detaches, and the one launch that succeeds is stopped at once.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from runs_helpers import reap_runs, wait_for  # noqa: F401  (reap_runs is an autouse fixture)
from trainkit import make_data, make_run, write_tiny_cfg

from yolotui.runs import lock
from yolotui.runs.layout import ENDED_STATES
from yolotui.runs.status import effective_state

PY = sys.executable
REPO = Path(__file__).resolve().parent.parent


def _cli(args: list[str], env: dict[str, str] | None = None, **kwargs) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([PY, "-m", "yolotui", *args], capture_output=True, text=True, env=full_env, timeout=120,
                          **kwargs)


def _one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.fixture
def data(tmp_path):
    return make_data(tmp_path / "data", n_train=2, n_val=1, img=32)


def _train_args(tmp_path: Path, data: Path, *extra: str) -> list[str]:
    return ["train", "--cfg", str(write_tiny_cfg(tmp_path)), "--data", str(data), "--epochs", "1", "--batch", "2",
            "--img", "64", "--device", "cpu", "--workers", "0", "--project", str(tmp_path / "runs"), *extra]


# ---------------------------------------------------------------------------------------------- exactly one winner of two launches

def test_two_simultaneous_train_exist_ok_one_wins_the_other_names_it(tmp_path, data):
    env = {**os.environ, "PYTHONPATH": str(REPO), "YOLOTUI_TORCH_THREADS": "1"}
    procs = [subprocess.Popen([PY, "-m", "yolotui", *_train_args(tmp_path, data, "--name", "same", "--exist-ok",
                                                                  "--epochs", str(epochs))],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for epochs in (3, 4)]
    results = [(p.wait(timeout=120), p.stdout.read(), p.stderr.read()) for p in procs]
    run_dir = tmp_path / "runs" / "same"
    try:
        codes = sorted(code for code, _, _ in results)
        assert codes == [0, 1], results
        winner = next(i for i, (code, _, _) in enumerate(results) if code == 0)
        loser_err = next(err for code, _, err in results if code == 1)
        assert len(loser_err.strip().splitlines()) == 1 and "live, owned by pid" in loser_err
        assert "yolotui train" in loser_err or "the supervisor of same" in loser_err
        opt = yaml.safe_load((run_dir / "opt.yaml").read_text())
        assert opt["epochs"] == (3, 4)[winner]  # the winner's settings only
    finally:
        _cli(["stop", str(run_dir), "--force"])
    assert effective_state(run_dir) in ENDED_STATES


# --------------------------------------------------------------------------------------------- checks before anything detaches

@pytest.mark.parametrize("case", ["no-images", "not-yaml", "laughs"])
def test_bad_data_yaml_is_refused_before_anything_detaches(tmp_path, data, case):
    bad = tmp_path / f"{case}.yaml"
    if case == "no-images":
        (tmp_path / "empty").mkdir()
        bad.write_text(f"path: {tmp_path / 'empty'}\ntrain: .\nval: .\nnames: [a]\n")
    elif case == "not-yaml":
        bad.write_text("train: [unclosed\n")
    else:
        bad.write_text("a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"{c}: &{c} [" + ", ".join([f"*{p}"] * 10) + "]\n" for p, c in zip("abcdefgh", "bcdefghi")) +
            "train: .\nval: .\nnames: *i\n")
    line = _one_line_error(_cli(_train_args(tmp_path, bad, "--name", "x")))
    assert bad.name in line
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.parametrize("case", ["unknown-module", "not-a-model"])
def test_bad_model_yaml_is_refused_before_anything_detaches(tmp_path, data, case):
    cfg = yaml.safe_load(write_tiny_cfg(tmp_path).read_text())
    bad = tmp_path / f"{case}.yaml"
    if case == "unknown-module":
        cfg["backbone"][0][2] = "Conv9000"
        bad.write_text(yaml.safe_dump(cfg))
    else:
        bad.write_text("just: text\n")
    args = _train_args(tmp_path, data, "--name", "x")
    args[args.index("--cfg") + 1] = str(bad)
    line = _one_line_error(_cli(args))
    assert bad.name in line and ("Conv9000" in line if case == "unknown-module" else "backbone" in line)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_engine_and_preflight_know_the_same_modules():
    from yolotui.configs.modules import KNOWN_MODULES
    from yolotui.engine.model.builder import MODULES

    assert set(MODULES) == set(KNOWN_MODULES)


def test_resume_checks_last_pt_before_launching(tmp_path):
    run_dir = make_run(tmp_path, "r")
    last = run_dir / "weights" / "last.pt"
    with zipfile.ZipFile(last, "w") as archive:
        archive.writestr("last/data.pkl", b"\x80\x02}q\x00.")
    data = last.read_bytes()
    last.write_bytes(data[: len(data) // 2])  # torn
    (run_dir / "weights" / "last.pt.json").write_text(json.dumps({"epoch": 0, "epochs": 2, "step": 1}))
    line = _one_line_error(_cli(["resume", str(run_dir)]))
    assert "last.pt" in line and "corrupt" in line
    assert not lock.is_held(run_dir) and not (run_dir / "run.yaml").exists()


# --------------------------------------------------------------------------------------------- one-line errors

def test_run_names_are_bounded_and_plain(tmp_path, data):
    for name, words in (("n" * 300, "at most 100"), ("-x", "starts with '-'"), ("a b", "letters, digits"),
                        ("a;rm", "letters, digits")):
        line = _one_line_error(_cli(_train_args(tmp_path, data, f"--name={name}")))
        assert words in line, line
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.parametrize("args", [
    ["--save-period-min", "nan"], ["--save-period-min", "inf"], ["--label-smoothing", "nan"],
    ["--restart-backoff", "nan"], ["--restart-backoff", "inf"], ["--img", "1000000"],
])
def test_nan_inf_and_huge_images_are_refused(tmp_path, data, args):
    line = _one_line_error(_cli(_train_args(tmp_path, data, "--name", "x", *args)))
    assert args[0].lstrip("-").split("-")[0] in line
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.parametrize("args", [
    ["finetune", "--from", "nothing", "--data", "d.yaml", "--lr-scale", "nan"],
    ["val", "--weights", "w.pt", "--data", "d.yaml", "--conf", "nan"],
    ["gpu", "--watch", "--interval", "inf"],
    ["stop", "somerun", "--grace", "nan"],
    ["logs", "somerun", "--interval", "nan"],
    ["resume", "somerun", "--stall-timeout", "nan"],
])
def test_every_float_flag_refuses_nan_and_inf(tmp_path, args):
    line = _one_line_error(_cli(args, cwd=tmp_path))
    assert "nan" in line or "inf" in line or "finite" in line


def test_val_of_a_file_that_is_not_a_checkpoint(tmp_path, data):
    line = _one_line_error(_cli(["val", "--weights", "/etc/passwd", "--data", str(data), "--device", "cpu"]))
    assert "/etc/passwd" in line and "not a checkpoint" in line


def test_demo_data_into_a_file(tmp_path):
    line = _one_line_error(_cli(["demo-data", "/etc/passwd"]))
    assert "/etc/passwd" in line


def test_unwritable_home_is_one_line_and_leaves_nothing(tmp_path):
    line = _one_line_error(_cli(["exec", "--project", str(tmp_path / "proj"), "--name", "x", "--", "true"],
                                env={"YOLOTUI_HOME": "/dev/null/home"}))
    assert "/dev/null/home" in line
    assert not (tmp_path / "proj").exists()


def test_follow_up_commands_are_shell_quoted(tmp_path, capsys):
    from yolotui.commands._launch import after_launch
    from yolotui.jobs.launch import started

    run_dir = tmp_path / "my runs; rm -rf ~" / "q"
    run_dir.mkdir(parents=True)
    after_launch(started(run_dir, "started", [], []), attach=False)
    text = capsys.readouterr().out
    follow, stop_part = text.split("follow it with: ", 1)[1].splitlines()[0].split("    stop it with: ")
    assert shlex.split(follow) == ["yolotui", "attach", str(run_dir)]
    assert shlex.split(stop_part) == ["yolotui", "stop", str(run_dir)]
