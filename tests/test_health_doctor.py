"""Run diagnosis, drift and the `yolotui doctor` command (subprocess, like a user runs it)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import yaml
from _health_fixtures import HYP, OPT, save_malicious, save_yolotui

from yolotui.health.drift import check_drift, data_fingerprint, diff_mappings
from yolotui.health.report import render_text
from yolotui.jobs.doctor import diagnose_run
from yolotui.runs.events import EventWriter

DATA = {"path": "shapes", "train": "images/train", "val": "images/val", "nc": 3, "names": ["circle", "square", "tri"]}


def make_run(root: Path, epoch: int = 3, epochs: int = 10) -> Path:
    """A run directory as the launcher and trainer leave it."""
    run = root / "runs" / "exp"
    (run / "weights").mkdir(parents=True)
    data_yaml = root / "data.yaml"
    data_yaml.write_text(yaml.safe_dump(DATA, sort_keys=False))
    opt = dict(OPT, epochs=epochs, data=str(data_yaml))
    (run / "opt.yaml").write_text(yaml.safe_dump(opt))
    (run / "hyp.yaml").write_text(yaml.safe_dump(HYP))
    fingerprint = data_fingerprint(data_yaml)
    (run / "run.yaml").write_text(yaml.safe_dump({"name": "exp", "epochs": epochs, "data": str(data_yaml),
                                                  **fingerprint}))
    EventWriter(run / "events.jsonl", attempt=1).emit("start", world_size=1, devices=[], resumed_from=None,
                                                       opt=opt, hyp=HYP, **fingerprint)
    save_yolotui(run / "weights" / "last.pt", epoch=epoch, epochs=epochs, opt=opt)
    save_yolotui(run / "weights" / "best.pt", epoch=max(0, epoch - 1), epochs=epochs, opt=opt)
    os.utime(run / "weights" / "best.pt", (time.time() - 100, time.time() - 100))
    return run


def doctor(cli_env, yolotui_cmd, *args, timeout=300):
    proc = subprocess.run([*yolotui_cmd, "doctor", *args], capture_output=True, text=True, env=cli_env,
                          timeout=timeout)
    return proc


def test_clean_run_has_no_drift_and_recommends_resume(tmp_path):
    run = make_run(tmp_path)
    assert check_drift(run) == []
    diagnosis = diagnose_run(run, environment=False, logind=False)
    assert diagnosis.last.verdict == "resumable" and diagnosis.best.verdict == "resumable"
    assert diagnosis.recommended == "resume"
    assert diagnosis.recommended_checkpoint.endswith("last.pt")
    assert "resume" in render_text(diagnosis)


def test_changing_data_yaml_names_the_key(tmp_path):
    run = make_run(tmp_path)
    data_yaml = tmp_path / "data.yaml"
    changed = dict(DATA, names=["circle", "box", "tri"])
    data_yaml.write_text(yaml.safe_dump(changed, sort_keys=False))
    items = check_drift(run)
    assert [(i.file, i.key, i.was, i.now) for i in items] == [("data.yaml", "names", ["circle", "square", "tri"],
                                                                ["circle", "box", "tri"])]


def test_data_drift_from_the_hash_alone(tmp_path):
    run = make_run(tmp_path)
    run_yaml = yaml.safe_load((run / "run.yaml").read_text())
    run_yaml.pop("data_config")
    (run / "run.yaml").write_text(yaml.safe_dump(run_yaml))
    (run / "events.jsonl").unlink()
    (tmp_path / "data.yaml").write_text("# edited\n" + yaml.safe_dump(DATA))
    items = check_drift(run)
    assert len(items) == 1 and items[0].key == "sha256"


def test_opt_and_hyp_drift_against_the_checkpoint(tmp_path):
    run = make_run(tmp_path)
    opt = yaml.safe_load((run / "opt.yaml").read_text())
    opt["batch_size"] = 32
    (run / "opt.yaml").write_text(yaml.safe_dump(opt))
    (run / "hyp.yaml").write_text(yaml.safe_dump(dict(HYP, lr0=0.02)))
    keys = {(i.file, i.key) for i in check_drift(run)}
    assert keys == {("opt.yaml", "batch_size"), ("hyp.yaml", "lr0")}


def test_diff_mappings_treats_1_and_1_0_alike_and_nests():
    assert diff_mappings("f", {"a": 1, "b": {"c": 2}}, {"a": 1.0, "b": {"c": 3}})[0].key == "b.c"


def test_corrupt_last_recommends_the_fallback_and_notes_ages(tmp_path):
    run = make_run(tmp_path)
    last = run / "weights" / "last.pt"
    last.write_bytes(last.read_bytes()[:1000])
    os.utime(last, (time.time() - 500, time.time() - 500))
    diagnosis = diagnose_run(run, environment=False, logind=False)
    assert diagnosis.last.verdict == "corrupt"
    assert diagnosis.recommended == "resume-from-fallback"
    assert diagnosis.recommended_checkpoint.endswith("best.pt")
    assert any("older than best.pt" in note for note in diagnosis.notes)


def test_doctor_cli_reports_data_drift(tmp_path, cli_env, yolotui_cmd):
    run = make_run(tmp_path)
    (tmp_path / "data.yaml").write_text(yaml.safe_dump(dict(DATA, nc=4), sort_keys=False))
    proc = doctor(cli_env, yolotui_cmd, str(run), "--json", "--no-env")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["last"]["verdict"] == "resumable"
    assert {"file": "data.yaml", "key": "nc", "was": 3, "now": 4} in report["drift"]
    assert report["logind"]["strategy"] in ("setsid", "systemd-run-scope", "at-risk")
    text = doctor(cli_env, yolotui_cmd, str(run), "--no-env").stdout
    assert "data.yaml: nc: 3 -> 4" in text


def test_doctor_cli_by_name_from_the_index(tmp_path, cli_env, yolotui_cmd):
    from yolotui.runs import index

    run = make_run(tmp_path)
    index.add(run, "my-run")
    proc = doctor(cli_env, yolotui_cmd, "my-run", "--json", "--no-env")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["run_dir"] == str(run.resolve())
    missing = doctor(cli_env, yolotui_cmd, "no-such-run")
    assert missing.returncode == 2 and "no-such-run" in missing.stderr and len(missing.stderr.splitlines()) == 1


def test_doctor_on_a_text_file_exits_1(tmp_path, cli_env, yolotui_cmd):
    path = tmp_path / "notes.pt"
    path.write_text("hello\n")
    proc = doctor(cli_env, yolotui_cmd, str(path))
    assert proc.returncode == 1 and "FOREIGN" in proc.stdout


def test_doctor_deep_never_runs_a_malicious_payload(tmp_path, cli_env, yolotui_cmd):
    marker = tmp_path / "pwned"
    path = tmp_path / "last.pt"
    save_malicious(path, marker, zipped=True)
    proc = doctor(cli_env, yolotui_cmd, str(path), "--deep", "--json")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["verdict"] == "foreign"
    assert report["deep"]["ok"] is False and "open" in report["deep"]["error"]
    assert not marker.exists()


def test_doctor_deep_loads_a_good_checkpoint(tmp_path, cli_env, yolotui_cmd):
    path = tmp_path / "last.pt"
    save_yolotui(path)
    proc = doctor(cli_env, yolotui_cmd, str(path), "--deep", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["verdict"] == "resumable"
    assert report["deep"]["ok"] is True and "optimizer" in report["deep"]["keys"]


def test_opt_keys_added_by_a_writer_are_not_drift_but_removed_ones_are(tmp_path):
    run = make_run(tmp_path)
    opt = yaml.safe_load((run / "opt.yaml").read_text())
    opt["cache"] = "ram"  # a default a newer writer adds
    opt["save_dir"] = str(run)
    del opt["seed"]
    (run / "opt.yaml").write_text(yaml.safe_dump(opt))
    assert [(i.key, i.was, i.now) for i in check_drift(run)] == [("seed", 0, None)]


def test_start_event_config_is_the_opt_baseline_without_a_checkpoint(tmp_path):
    run = make_run(tmp_path)
    for name in ("last.pt", "best.pt", "last.pt.json", "best.pt.json"):
        (run / "weights" / name).unlink()
    (run / "events.jsonl").unlink()
    EventWriter(run / "events.jsonl", attempt=1).emit("start", config={"epochs": 10, "batch_size": 8}, devices=["cpu"])
    opt = yaml.safe_load((run / "opt.yaml").read_text())
    (run / "opt.yaml").write_text(yaml.safe_dump(dict(opt, batch_size=4)))
    assert [(i.file, i.key, i.was, i.now) for i in check_drift(run)] == [("opt.yaml", "batch_size", 8, 4)]
    diagnosis = diagnose_run(run, environment=False, logind=False)
    assert diagnosis.recommended == "restart" and diagnosis.last.verdict == "missing"


def test_doctor_accepts_the_weights_folder_and_refuses_a_plain_folder(tmp_path, cli_env, yolotui_cmd):
    run = make_run(tmp_path)
    proc = doctor(cli_env, yolotui_cmd, str(run / "weights"), "--json", "--no-env")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["run_dir"] == str(run)
    plain = tmp_path / "plain"
    plain.mkdir()
    refused = doctor(cli_env, yolotui_cmd, str(plain))
    assert refused.returncode == 2 and "plain" in refused.stderr


def test_remedy_settings_in_the_checkpoint_are_not_drift(tmp_path):
    """A nan/oom remedy sets lr_scale/accumulate in the trainer's opt; opt.yaml lacking them is no drift."""
    from yolotui.health.drift import check_drift

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "opt.yaml").write_text("epochs: 5\nbatch_size: 8\n")
    items = check_drift(run_dir, checkpoint_opt={"epochs": 5, "batch_size": 8, "lr_scale": 0.5, "accumulate": 16},
                        checkpoint_hyp={})
    assert [i for i in items if i.file == "opt.yaml"] == []
    items = check_drift(run_dir, checkpoint_opt={"epochs": 3, "batch_size": 8, "lr_scale": 0.5}, checkpoint_hyp={})
    assert [(i.file, i.key) for i in items if i.file == "opt.yaml"] == [("opt.yaml", "epochs")]


def test_best_written_after_last_at_the_same_epoch_is_no_alarm(tmp_path):
    """A healthy run writes best.pt a few seconds after last.pt at the same epoch end: no 'did not land' note."""
    run = make_run(tmp_path)
    last, best = run / "weights" / "last.pt", run / "weights" / "best.pt"
    os.utime(last, (time.time() - 300, time.time() - 300))
    os.utime(best, (time.time() - 4, time.time() - 4))
    diagnosis = diagnose_run(run, environment=False, logind=False)
    assert diagnosis.last.epoch >= diagnosis.best.epoch
    assert not any("behind" in note or "older than" in note for note in diagnosis.notes), diagnosis.notes


def test_no_checkpoint_config_means_no_drift_from_an_empty_baseline(tmp_path):
    """Without a config in the checkpoints, hyp.yaml's keys are not all 'None -> value' drift."""
    run = make_run(tmp_path)
    for name in ("last.pt", "best.pt"):
        (run / "weights" / name).unlink()
    diagnosis = diagnose_run(run, environment=False, logind=False)
    assert not any(item.was is None for item in diagnosis.drift), diagnosis.drift


def test_hyp_keys_filled_in_after_launch_are_not_drift(tmp_path):
    run = make_run(tmp_path)
    (run / "hyp.yaml").write_text(yaml.safe_dump(dict(HYP, warmup_min_iters=100)))
    assert check_drift(run) == []
