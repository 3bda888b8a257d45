"""The ultralytics backend's pieces that need no training: recognition, the supervised argv, the shim's own flags
and file rewrites, results.csv in ultralytics' dialect, the OOM remedy's flag, `yolotui train --backend
ultralytics` argument mapping. (End to end against the real package: tests/test_ultralytics_backend.py.)"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from yolotui.backends import get_backend
from yolotui.backends.ultralytics import shim
from yolotui.backends.ultralytics.launch import output_folder, resume_settings, trainer_command
from yolotui.backends.ultralytics.recognise import (
    CLI,
    SCRIPT,
    UltralyticsCommand,
    extra_arguments,
    recognise_command,
)
from yolotui.errors import UserError
from yolotui.runs.results import read_rows
from yolotui.runs.runconfig import set_flag
from yolotui.runs.summary import results_facts
from yolotui.supervisor import policy

ULTRA_HEADER = ("epoch,time,train/box_loss,train/cls_loss,train/dfl_loss,metrics/precision(B),metrics/recall(B),"
                "metrics/mAP50(B),metrics/mAP50-95(B),val/box_loss,val/cls_loss,val/dfl_loss,lr/pg0,lr/pg1,lr/pg2\n")


def ultra_row(epoch: int, map5095: float) -> str:
    return f"{epoch},1.5,1.2,1.1,0.9,0.5,0.4,0.3,{map5095},1,1,1,0.001,0.001,0.001\n"


def test_yolo_train_forms_are_recognised_and_other_modes_are_not(tmp_path):
    yolo = tmp_path / "yolo"
    yolo.write_text(f"#!{sys.executable}\nfrom ultralytics.cfg import entrypoint\n")
    found = recognise_command([str(yolo), "detect", "train", "model=yolov9t.yaml", "data=d.yaml"], cwd=tmp_path)
    assert found is not None and found.mode == CLI and found.python == sys.executable
    assert found.task == "detect" and found.overrides()["model"] == "yolov9t.yaml"
    assert recognise_command([str(yolo), "val", "model=best.pt"], cwd=tmp_path) is None
    assert recognise_command([str(yolo), "predict", "model=best.pt"], cwd=tmp_path) is None
    module = recognise_command(["python3", "-u", "-m", "ultralytics", "segment", "train", "data=d.yaml"])
    assert module is not None and module.python == "python3" and module.task == "segment"
    assert recognise_command(["python3", "-m", "ultralytics", "export", "model=a.pt"]) is None
    assert recognise_command(["bash", "-c", "yolo train"]) is None


def test_a_script_is_recognised_only_when_it_imports_ultralytics_and_trains(tmp_path):
    trains = tmp_path / "fit.py"
    trains.write_text("from ultralytics import YOLO\nYOLO('yolov9t.yaml').train(data='d.yaml', epochs=3)\n")
    other = tmp_path / "other.py"
    other.write_text("import torch\nmodel.train()\n")
    predicts = tmp_path / "predict.py"
    predicts.write_text("from ultralytics import YOLO\nYOLO('best.pt').predict('img.jpg')\n")
    found = recognise_command([sys.executable, str(trains), "--flag"], cwd=tmp_path)
    assert found is not None and found.mode == SCRIPT and found.script == trains.resolve() and found.args == ["--flag"]
    assert recognise_command([sys.executable, "other.py"], cwd=tmp_path) is None
    assert recognise_command([sys.executable, "predict.py"], cwd=tmp_path) is None
    assert recognise_command([sys.executable, "missing.py"], cwd=tmp_path) is None


def test_the_supervised_command_writes_into_the_run_folder(tmp_path):
    cmd = UltralyticsCommand(python="/x/python", args=["train", "model=yolov9t.yaml", "project=elsewhere",
                                                       "name=mine", "exist_ok=False", "epochs=3"])
    project, name, exist_ok = output_folder(cmd, tmp_path)
    assert (project, name, exist_ok) == (tmp_path / "elsewhere", "mine", False)
    assert output_folder(UltralyticsCommand(python="p", args=["pose", "train"]), tmp_path)[:2] == (
        tmp_path / "runs" / "pose", "train")
    run_dir = tmp_path / "runs" / "exp"
    argv = trainer_command(cmd, run_dir)
    assert argv[:2] == ["/x/python", str(Path(shim.__file__))]
    assert argv[argv.index("--") + 1:] == ["train", "model=yolov9t.yaml", "epochs=3", f"project={run_dir.parent}",
                                           "name=exp", "exist_ok=True"]
    settings = resume_settings(run_dir, batch=8)
    assert settings["resume_args"] == ["--yolotui-resume", str(run_dir / "weights" / "last.pt"),
                                       "--yolotui-batch", "8"]
    backend = get_backend("ultralytics")
    assert not backend.resume_usable({**settings, "backend": "ultralytics"})  # no last.pt: the original command
    assert backend.supports("resume") and backend.supports("extend") and not backend.supports("lr_scale")


def test_the_shim_takes_its_own_flags_wherever_they_stand():
    own, user = shim.split_argv(["--yolotui-run-dir", "/r", "--yolotui-mode", "cli", "--", "train", "epochs=3",
                                 "--yolotui-resume", "/r/weights/last.pt", "--yolotui-batch=4"])
    assert own == {"--yolotui-run-dir": "/r", "--yolotui-mode": "cli", "--yolotui-resume": "/r/weights/last.pt",
                   "--yolotui-batch": "4"}
    assert user == ["train", "epochs=3"]
    assert shim.parse_faults("oom@epoch=1,crash@step=3:always,bogus") == [("oom", "epoch", 1, False),
                                                                        ("crash", "step", 3, True)]
    assert shim.classify(RuntimeError("CUDA out of memory. Tried"), "RuntimeError: CUDA out of memory") == "oom"
    assert shim.classify(RuntimeError("Dataset 'd.yaml' error ❌ missing"), "x") == "data"
    assert shim.classify(RuntimeError("Training failed: NaN persisted for 4 epochs"), "x") == "nan"
    assert shim.classify(ConnectionResetError("peer"), "x") == "comm"


def test_the_shim_drops_rows_and_events_a_resume_redoes(tmp_path):
    results = tmp_path / "results.csv"
    results.write_text(ULTRA_HEADER + ultra_row(1, 0.1) + ultra_row(2, 0.2) + ultra_row(3, 0.3) + "4,0.1,1")
    assert shim.drop_results_after(str(results), 2) == 2  # epoch 3's row and the torn one
    assert [int(r["epoch"]) for r in read_rows(results)] == [0, 1]
    events = tmp_path / "events.jsonl"
    lines = [{"type": "epoch", "epoch": 0}, {"type": "checkpoint", "epoch": 1}, {"type": "batch", "epoch": 1},
             {"type": "epoch", "epoch": 1}, {"type": "checkpoint", "epoch": 2}, {"type": "done"},
             {"type": "stop", "epoch": 1}]
    events.write_text("".join(json.dumps(e) + "\n" for e in lines) + '{"type": "bat')
    assert shim.drop_events_from(str(events), 1) == 6
    assert [json.loads(line)["type"] for line in events.read_text().splitlines()] == ["epoch", "checkpoint"]


def test_results_csv_of_ultralytics_reads_under_the_official_names(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text(ULTRA_HEADER + ultra_row(1, 0.25) + ultra_row(2, 0.5) + "3,0.1")
    rows = read_rows(path)
    assert [int(r["epoch"]) for r in rows] == [0, 1]  # counted from 0, as the official header
    assert rows[1]["metrics/mAP_0.5:0.95"] == 0.5 and rows[1]["x/lr0"] == 0.001
    assert results_facts(path) == (2, 0.5)


def test_the_oom_remedy_halves_the_batch_through_the_shim_flag():
    run_config = {"backend": "ultralytics", "command": ["py", "shim.py", "--", "train", "batch=16"],
                  "batch_flag": "--yolotui-batch", "resume_args": ["--yolotui-resume", "/r/weights/last.pt"],
                  "restart": {"max_attempts": 3}}
    record = {"attempt": 1, "exit_code": 1, "exit_signal": None, "command": run_config["command"]}
    events = [{"type": "start", "config": {"batch_size": 16}, "world_size": 1},
              {"type": "error", "kind": "oom", "message": "RuntimeError: CUDA out of memory"}]
    decision = policy.decide(record, run_config, events)
    assert decision.retry and decision.failure_class == "oom"
    assert decision.changes["args"] == {"--yolotui-batch": 8}
    assert decision.settings["batch_size"] == [16, 8]
    argv = set_flag(run_config["command"] + run_config["resume_args"], "--yolotui-batch", 8)
    assert argv[-2:] == ["--yolotui-batch", "8"]


def test_train_backend_ultralytics_maps_flags_and_passes_key_value_through():
    import argparse

    from yolotui.backends.ultralytics.cli import passthrough, ultralytics_args

    args = argparse.Namespace(model="yolov9t.yaml", raw_argv=["--backend", "ultralytics", "--model", "yolov9t.yaml",
                                                              "--data", "d.yaml", "lr0=0.002", "plots=False"])
    given = {"data": "d.yaml", "epochs": 3, "batch_size": 8, "imgsz": 64, "name": "mine"}
    assert ultralytics_args(args, given) == ["train", "model=yolov9t.yaml", "data=d.yaml", "epochs=3", "batch=8",
                                             "imgsz=64", "name=mine", "lr0=0.002", "plots=False"]
    with pytest.raises(UserError, match="--hyp does not apply"):
        ultralytics_args(args, {**given, "hyp": "h.yaml"})
    with pytest.raises(UserError, match="key=value"):
        passthrough(["--data", "d.yaml", "stray"])
    assert extra_arguments("lr0=0.001 'name=a b'") == ["lr0=0.001", "name=a b"]
    with pytest.raises(UserError, match="not key=value"):
        extra_arguments("lr0 0.001")


def test_the_shim_probe_answers_without_importing_ultralytics():
    import subprocess

    done = subprocess.run([sys.executable, shim.__file__, "--yolotui-probe"], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": ""})
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    assert facts["executable"] == sys.executable and facts["python"] == sys.version.split()[0]
    assert set(facts) >= {"torch", "ultralytics", "numpy"}
