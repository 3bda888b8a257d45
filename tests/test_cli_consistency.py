"""One CLI: every option has help, `train --help` is grouped, one spelling shown for batch and image size (the
other spellings still accepted), `--json` on the commands that start a run, and `yolotui rm`."""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import pytest
from runs_helpers import reap_runs, wait_for  # noqa: F401  (reap_runs is an autouse fixture)

from yolotui.cli import COMMANDS, build_parser
from yolotui.runs import index, lock
from yolotui.runs.status import effective_state


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_shown_option_has_help_and_one_spelling_for_batch_and_image_size():
    commands = _subparsers(build_parser(None))
    assert set(commands) == set(COMMANDS)
    for name, parser in commands.items():
        for action in parser._actions:
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"yolotui {name}: {action.option_strings or action.dest} has no help"
        text = parser.format_help()
        for hidden in ("--batch ", "--batch,", "--img ", "--img,", "--img-size"):
            assert hidden not in text, f"yolotui {name} --help shows the alias {hidden.strip(' ,')}"


@pytest.mark.parametrize("command", ["train", "resume", "finetune", "demo", "val"])
def test_batch_and_image_size_are_accepted_under_every_spelling(command):
    parser = _subparsers(build_parser(command))[command]
    required = {"finetune": ["--from", "r", "--data", "d"], "val": ["--weights", "w", "--data", "d"]}.get(command, [])
    for batch in ("--batch", "--batch-size"):
        assert parser.parse_args([*required, batch, "8"]).batch_size == 8
    if command != "resume":
        for img in ("--img", "--imgsz", "--img-size"):
            assert parser.parse_args([*required, img, "320"]).imgsz == 320


def test_train_help_is_grouped():
    text = _subparsers(build_parser("train"))["train"].format_help()
    order = [text.index(f"\n{title}") for title in ("data:", "model:", "schedule", "hardware", "run control",
                                                     "recovery")]
    assert order == sorted(order)
    hardware = text[text.index("\nhardware"):text.index("\nrun control")]
    assert "--device" in hardware and "--nproc-per-node" in hardware
    assert "--resume" in text[text.index("\nrecovery"):]


def test_exec_json_names_the_run_and_rm_forgets_it(tmp_path, yolotui_cmd, cli_env):
    done = subprocess.run([*yolotui_cmd, "exec", "--json", "--project", str(tmp_path / "runs"), "--name", "j", "--",
                           "true"], env=cli_env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    run_dir = Path(answer["folder"])
    assert answer["name"] == "j" and run_dir == (tmp_path / "runs" / "j").resolve()
    assert answer["state"] in ("queued", "running", "finished")
    wait_for(lambda: effective_state(run_dir) == "finished", timeout=20)
    home = {"YOLOTUI_HOME": cli_env["YOLOTUI_HOME"]}
    listed = subprocess.run([*yolotui_cmd, "ls", "--json"], env=cli_env, capture_output=True, text=True,
                            timeout=60)
    assert "j" in {row["name"] for row in json.loads(listed.stdout)}, home
    removed = subprocess.run([*yolotui_cmd, "rm", "j"], env=cli_env, capture_output=True, text=True, timeout=60)
    assert removed.returncode == 0, removed.stderr
    listed = subprocess.run([*yolotui_cmd, "ls", "--json"], env=cli_env, capture_output=True, text=True,
                            timeout=60)
    assert "j" not in {row["name"] for row in json.loads(listed.stdout)} and run_dir.is_dir()


def test_rm_refuses_a_live_run_and_files_deletes_the_folder(tmp_path, monkeypatch):
    from yolotui.errors import UserError
    from yolotui.jobs.exec_run import ExecRequest, exec_run
    from yolotui.jobs.rm import RemoveRequest, remove

    live = exec_run(ExecRequest(["sleep", "60"], name="live", project=str(tmp_path / "runs")))
    wait_for(lambda: effective_state(live.run_dir) == "running", timeout=20)
    with pytest.raises(UserError, match="stop it first"):
        remove(RemoveRequest([str(live.run_dir)], files=True))
    assert live.run_dir.is_dir() and any(e.path == str(live.run_dir) for e in index.entries())
    done = exec_run(ExecRequest(["true"], name="done", project=str(tmp_path / "runs")))
    # the supervisor writes `finished` a moment before it releases the lock: wait for both
    wait_for(lambda: effective_state(done.run_dir) == "finished" and not lock.is_held(done.run_dir), timeout=20)
    result = remove(RemoveRequest([str(done.run_dir)], files=True))
    assert result.deleted == [done.run_dir] and not done.run_dir.exists()
    assert all(e.path != str(done.run_dir) for e in index.entries())
