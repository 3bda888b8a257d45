"""The tracker flags (train, finetune, resume), their run.yaml entry and how a resume carries it; the one-line
messages naming the extra; `yolotui tensorboard` (the folders of engine, official and save_dir runs, --print,
and a real TensorBoard answering on its port, then stopped); `status` for an official run."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request

import pytest
import yaml
from torch.utils.tensorboard import SummaryWriter
from trackerkit import wait_until, write_run_yaml

from yolotui.cli import build_parser, main
from yolotui.commands._runflags import extras_from
from yolotui.errors import UserError
from yolotui.jobs.runextras import carried_over
from yolotui.runs import index
from yolotui.runs import trackers as tracker_settings
from yolotui.runs.trackers import TrackerFlags


def _args(command, *argv):
    required = {"finetune": ["--from", "r", "--data", "d"]}.get(command, [])
    return build_parser(command).parse_args([command, *required, *argv])


@pytest.mark.parametrize("command", ["train", "finetune", "resume"])
def test_tracker_flags_become_the_run_yaml_entry(command, tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.chdir(tmp_path)
    entry = extras_from(_args(command, "--no-tensorboard", "--mlflow", "store", "--wandb", "proj")).entries()["trackers"]
    assert entry["tensorboard"] is False
    assert entry["mlflow"] == {"uri": f"file:{tmp_path.resolve() / 'store'}", "experiment": "yolotui"}
    assert entry["wandb"] == {"project": "proj", "entity": None, "mode": None}
    assert "trackers" not in extras_from(_args(command)).entries()  # nothing given: the defaults (TensorBoard on)
    bare = extras_from(_args(command, "--mlflow")).entries()["trackers"]
    assert bare == {"mlflow": {"uri": None, "experiment": "yolotui"}}  # the trainer's default store, PROJECT/mlruns
    server = extras_from(_args(command, "--mlflow", "http://mlflow.lan:5000")).entries()["trackers"]
    assert server["mlflow"]["uri"] == "http://mlflow.lan:5000"


def test_a_missing_package_or_a_bad_project_is_one_line_naming_the_extra(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(tracker_settings, "installed", lambda name: False)
    for flags, extra in ((TrackerFlags(mlflow=True), "mlflow"), (TrackerFlags(wandb="p"), "wandb")):
        with pytest.raises(UserError, match=rf"is not installed: pip install 'yolotui\[{extra}\]'"):
            flags.entry()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_run_yaml(run_dir, {})
    _events(run_dir)
    assert main(["tensorboard", str(run_dir), "--print"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("yolotui: error: tensorboard is not installed: pip install 'yolotui[tensorboard]'")
    assert "\n" not in error
    monkeypatch.undo()
    with pytest.raises(UserError, match="give a W&B project name"):
        TrackerFlags(wandb="team/proj").entry()


def test_official_runs_refuse_the_engine_tracker_flags(capsys):
    assert main(["train", "--backend", "official", "--wandb", "p"]) == 2
    assert "the official trainer writes its own TensorBoard files" in capsys.readouterr().err


def test_a_resume_keeps_the_trackers_and_their_run_ids_a_reused_folder_does_not(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_run_yaml(run_dir, {"tensorboard": False, "mlflow": {"uri": "file:/x", "experiment": "yolotui"}},
                   tracker_runs={"mlflow": {"run_id": "abc", "uri": "file:/x"}})
    (run_dir / "events.jsonl").write_text("")
    kept = carried_over(run_dir, {"trackers": {"wandb": {"project": "p"}}})
    assert kept["trackers"] == {"tensorboard": False, "mlflow": {"uri": "file:/x", "experiment": "yolotui"},
                                "wandb": {"project": "p"}}
    assert kept["tracker_runs"] == {"mlflow": {"run_id": "abc", "uri": "file:/x"}}
    assert carried_over(run_dir, {})["trackers"]["tensorboard"] is False
    (run_dir / "events.jsonl").unlink()  # --exist-ok set the earlier run's events aside: a new life
    assert "tracker_runs" not in carried_over(run_dir, {})


def _events(folder, tag="metrics/mAP_0.5"):
    folder.mkdir(parents=True, exist_ok=True)
    writer = SummaryWriter(log_dir=str(folder))
    writer.add_scalar(tag, 0.5, 0)
    writer.close()


def _three_runs(tmp_path):
    engine = tmp_path / "runs" / "engine"
    engine.mkdir(parents=True)
    write_run_yaml(engine, {})
    _events(engine)
    official = tmp_path / "runs" / "official"
    official.mkdir()
    official_out = tmp_path / "repo" / "runs" / "train" / "exp"
    write_run_yaml(official, {}, backend="official", official={"save_dir": str(official_out)})
    _events(official_out)
    other = tmp_path / "runs" / "other"
    other.mkdir()
    other_out = tmp_path / "elsewhere" / "train"
    write_run_yaml(other, {}, backend="exec", save_dir=str(other_out))
    _events(other_out)
    off = tmp_path / "runs" / "off"
    off.mkdir()
    write_run_yaml(off, {"tensorboard": False})
    return engine, official, official_out, other, other_out, off


def test_tensorboard_print_names_every_runs_folders(tmp_path, capsys):
    engine, official, official_out, other, other_out, off = _three_runs(tmp_path)
    assert yaml.safe_load((official / "run.yaml").read_text())["backend"] == "official"
    assert main(["tensorboard", str(engine), str(official), str(other), str(off), "--print", "--port", "6111"]) == 0
    out, err = capsys.readouterr()
    argv = out.split()
    assert argv[1:3] == ["-m", "tensorboard.main"]
    spec = argv[argv.index("--logdir_spec") + 1]
    assert spec.split(",") == [f"engine:{engine}", f"official:{official_out}", f"other:{other_out}"]
    assert argv[argv.index("--host") + 1] == "127.0.0.1" and argv[argv.index("--port") + 1] == "6111"
    assert "off: TensorBoard is off for this run (--no-tensorboard)" in err
    assert main(["tensorboard", str(engine), "--print"]) == 0
    argv = capsys.readouterr().out.split()
    assert argv[argv.index("--logdir") + 1] == str(engine)
    assert main(["tensorboard", str(off), "--print"]) == 2
    assert "nothing to show in TensorBoard: off: TensorBoard is off" in capsys.readouterr().err
    for run_dir in (engine, official, other):
        index.add(run_dir, run_dir.name)
    assert main(["tensorboard", "--print"]) == 0  # no RUN: every run yolotui knows
    assert capsys.readouterr().out.count(":") >= 3


def test_status_says_where_an_official_runs_own_tensorboard_files_are(tmp_path, capsys):
    _, official, official_out, *_ = _three_runs(tmp_path)
    from yolotui.jobs.tensorboard import status_lines

    assert status_lines(official) == [f"trackers   tensorboard: {official_out} (the official trainer's own event files)"]


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_tensorboard_serves_the_runs_on_localhost_until_stopped(tmp_path, yolotui_cmd, cli_env):
    engine, official, _, _, _, _ = _three_runs(tmp_path)
    port = _free_port()
    proc = subprocess.Popen([*yolotui_cmd, "tensorboard", str(engine), str(official), "--port", str(port)],
                            env=cli_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)

    def runs():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/runs", timeout=2) as answer:
                names = json.loads(answer.read())
        except (OSError, ValueError):
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            return None
        labels = {name.split("/")[0] for name in names}  # TensorBoard names them LABEL/. (the folder itself)
        return labels if {"engine", "official"} <= labels else None

    try:
        assert wait_until(runs, timeout=90, what="TensorBoard to answer") == {"engine", "official"}
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) != 0:
                break
        time.sleep(0.1)
    else:
        raise AssertionError("TensorBoard still answers after Ctrl-C")
