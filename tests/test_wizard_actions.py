"""Command lines and launching (yolotui.tui.actions), path completion, the wizards' field checks, `resume --from`,
and the rule that the TUI's wizard modules never import torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from _health_fixtures import save_yolotui
from wizard_kit import make_data, make_source_run

from yolotui.backends.engine.resume import restore_last
from yolotui.errors import UserError
from yolotui.tui import actions
from yolotui.tui import wizard_checks as checks
from yolotui.tui.widgets.path_input import complete_path

REPO_ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------------------------------ actions

def test_command_lines_use_the_cli_flags():
    assert actions.train_args("yolov9-s", "d.yaml", 10, 8, 640, "0", name="exp") == [
        "train", "--cfg", "yolov9-s", "--data", "d.yaml", "--epochs", "10", "--batch-size", "8", "--img", "640",
        "--device", "0", "--name", "exp"]
    assert actions.train_args("m.yaml", "d.yaml", 1, 1, 64, "cpu", hyp="h.yaml", project="/p", workers=0)[-6:] == [
        "--workers", "0", "--hyp", "h.yaml", "--project", "/p"]
    assert actions.resume_args("runs/exp", epochs=20, batch_size=4, from_ckpt="best.pt") == [
        "resume", "runs/exp", "--epochs", "20", "--batch-size", "4", "--from", "best.pt"]
    assert actions.finetune_args("runs/a", "d.yaml", "backbone", 30, 0.1, name="a-ft") == [
        "finetune", "--from", "runs/a", "--data", "d.yaml", "--freeze", "backbone", "--epochs", "30",
        "--lr-scale", "0.1", "--name", "a-ft"]
    assert actions.stop_args("r", grace_s=30) == ["stop", "r", "--grace", "30", "--no-wait"]
    assert actions.stop_args("r", force=True) == ["stop", "r", "--force", "--no-wait"]
    assert actions.save_args("r") == ["save", "r"]


def test_format_and_argv_never_need_a_shell():
    args = ["train", "--data", "my data/data.yaml", "--name", "a'b"]
    assert actions.format_command(args) == "yolotui train --data 'my data/data.yaml' --name 'a'\"'\"'b'"
    assert actions.cli_argv(args) == [sys.executable, "-m", "yolotui", *args]


def test_cli_result_message_and_run_folder():
    ok = actions.CliResult(["train"], 0, '{"name": "exp", "folder": "/x/runs/train/exp", "state": "running", '
                                         '"verb": "started", "warnings": []}\n')
    assert ok.ok and ok.message == "started run exp: /x/runs/train/exp"
    assert actions.launched_run_dir(ok) == Path("/x/runs/train/exp")
    resumed = actions.CliResult(["resume"], 0, '{"name": "e2e", "folder": "/r/e2e", "verb": "resumed"}\n')
    assert actions.launched_run_dir(resumed) == Path("/r/e2e") and resumed.message == "resuming run e2e: /r/e2e"
    human = actions.CliResult(["train"], 0, "started run exp: /x/runs/train/exp\n")
    assert actions.launched_run_dir(human) is None  # human text is never parsed for the run
    assert actions.with_json(["train", "--data", "d.yaml"])[-1] == "--json"
    assert actions.with_json(["exec", "--name", "n", "--", "sleep", "1"]) == ["exec", "--name", "n", "--json", "--",
                                                                              "sleep", "1"]
    assert actions.with_json(["stop", "r"]) == ["stop", "r"]
    bad = actions.CliResult(["train"], 2, "", "yolotui: error: --data x: no such file\n")
    assert not bad.ok and bad.message == "--data x: no such file"
    assert actions.launched_run_dir(bad) is None


def test_run_cli_runs_this_yolotui(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = actions.run_cli(["check-data", "missing.yaml"])
    assert result.returncode == 2 and "missing.yaml" in result.message
    version = actions.run_cli(["--version"])
    assert version.ok and version.stdout.startswith("yolotui")


def test_pager_argv(tmp_path):
    log = tmp_path / "train.log"
    assert actions.pager_argv(log, {"PAGER": "less -S"}) == ["less", "-S", str(log)]
    assert actions.pager_argv(log, {}) == ["less", "-R", "+G", str(log)]


def test_display_path_is_relative_inside_the_working_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert actions.display_path(tmp_path / "runs" / "exp") == "runs/exp"
    assert actions.display_path("/elsewhere/exp") == "/elsewhere/exp"


# ------------------------------------------------------------------------------------------ completion

def test_path_completion(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "coco.yaml").write_text("")
    (tmp_path / "data" / "coco.txt").write_text("")
    (tmp_path / "data" / ".hidden.yaml").write_text("")
    base = str(tmp_path)
    assert complete_path(f"{base}/da") == f"{base}/data/"
    assert complete_path(f"{base}/data/co", suffixes=(".yaml",)) == f"{base}/data/coco.yaml"
    assert complete_path(f"{base}/data/co") == f"{base}/data/coco.txt"  # first in sorted order
    assert complete_path(f"{base}/data/x") is None
    assert complete_path(f"{base}/data/.h") == f"{base}/data/.hidden.yaml"
    assert complete_path(f"{base}/data/coco.yaml") is None  # complete already
    assert complete_path("da", base=tmp_path) == "data/"


# ------------------------------------------------------------------------------------------ checks

def test_check_data_facts_and_errors(tmp_path):
    data = make_data(tmp_path / "data", n_train=3, n_val=2)
    facts = checks.check_data(str(data))
    assert facts.nc == 5 and facts.images == {"train": 3, "val": 2}
    assert facts.summary().startswith("5 classes (circle, square")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty.yaml").write_text(f"train: {tmp_path / 'empty'}\nval: {tmp_path / 'empty'}\nnames: [a]\n")
    for value, words in (("", "give the path"), (str(tmp_path / "nope.yaml"), "no such file"),
                         (str(tmp_path / "data"), "is a folder"), (str(tmp_path / "empty.yaml"), "no images")):
        with pytest.raises(UserError, match=words):
            checks.check_data(value)


def test_check_device():
    assert checks.check_device("cpu", []) == "cpu"
    assert checks.check_device("cuda:1", [0, 1]) == "1"
    assert checks.check_device("0, 1", [0, 1]) == "0,1"
    for value, gpus, words in (("0", [], "no GPU is visible"), ("2", [0, 1], "GPUs 0, 1"),
                               ("0,0", [0], "listed twice"), ("gpu0", [0], "not a device")):
        with pytest.raises(UserError, match=words):
            checks.check_device(value, gpus)


def test_device_choices_from_telemetry():
    gpu = SimpleNamespace(index=0, name="H200", memory_total_mb=143360.0, memory_used_mb=40960.0, error=None)
    lost = SimpleNamespace(index=1, name="H200", memory_total_mb=None, memory_used_mb=None, error="fell off")
    choices = checks.device_choices(SimpleNamespace(gpus=[gpu, lost]))
    assert [c.value for c in choices] == ["0", "cpu"]
    assert "100.0 GiB free of 140" in choices[0].label
    assert [c.value for c in checks.device_choices(None)] == ["cpu"]


def test_model_choices_and_names(tmp_path):
    choices = checks.model_choices()
    names = [c.name for c in choices]
    assert names[:5] == ["yolov9-t", "yolov9-s", "yolov9-m", "yolov9-c", "yolov9-e"] and "gelan-c" in names
    assert "GFLOPs" in choices[1].label and "M params" in choices[1].label
    (tmp_path / "exp").mkdir()
    assert checks.free_name(tmp_path, "exp") == "exp2"
    with pytest.raises(UserError, match="exists already"):
        checks.check_new_name(tmp_path, "exp")
    assert checks.check_new_name(tmp_path, "new") == tmp_path / "new"


# ------------------------------------------------------------------------------------------ resume --from

def test_restore_last_from_best(tmp_path):
    run_dir = make_source_run(tmp_path / "runs" / "exp")
    weights = run_dir / "weights"
    save_yolotui(weights / "best.pt", epoch=2, epochs=10)
    (weights / "last.pt").write_bytes((weights / "last.pt").read_bytes()[:500])  # torn
    restore_last(run_dir, "best.pt")
    assert (weights / "last.pt").read_bytes() == (weights / "best.pt").read_bytes()
    assert (weights / "last.pt.json").read_text() == (weights / "best.pt.json").read_text()
    kept = sorted(p.name for p in weights.iterdir() if ".damaged-" in p.name)
    assert len(kept) == 2 and kept[0].startswith("last.pt.damaged-")
    from yolotui.health.verdict import diagnose_checkpoint

    assert diagnose_checkpoint(weights / "last.pt").verdict == "resumable"


def test_restore_last_refuses_bad_choices(tmp_path):
    run_dir = make_source_run(tmp_path / "runs" / "exp")
    other = make_source_run(tmp_path / "runs" / "other")
    (run_dir / "weights" / "junk.pt").write_text("not a checkpoint")
    for value, words in (("nope.pt", "no such checkpoint"), (str(other / "weights" / "best.pt"), "finetune"),
                         ("junk.pt", "cannot be resumed from")):
        with pytest.raises(UserError, match=words):
            restore_last(run_dir, value)


def test_resume_cli_accepts_from(cli_env, yolotui_cmd, tmp_path):
    run_dir = make_source_run(tmp_path / "runs" / "exp")
    done = subprocess.run([*yolotui_cmd, "resume", str(run_dir), "--from", "nope.pt"], env=cli_env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--from nope.pt: no such checkpoint" in done.stderr


# ------------------------------------------------------------------------------------------ layering

def test_wizard_modules_never_import_torch(cli_env):
    code = ("import sys\n"
            "import yolotui.tui.app, yolotui.tui.app_actions, yolotui.tui.actions, yolotui.tui.wizard_checks\n"
            "import yolotui.tui.screens.wizard_new_run, yolotui.tui.screens.wizard_resume\n"
            "import yolotui.tui.screens.wizard_finetune, yolotui.tui.screens.confirm_stop\n"
            "import yolotui.jobs.resume\n"
            "from yolotui.tui import wizard_checks as c\n"
            "c.model_choices()\n"
            "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith(('torch.', 'torchvision', "
            "'yolotui.engine')))\n"
            "print(bad)\n")
    done = subprocess.run([sys.executable, "-c", code], env=cli_env, capture_output=True, text=True, timeout=60,
                          cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
