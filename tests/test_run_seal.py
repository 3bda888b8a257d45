"""run.yaml's seal: yolotui seals the command, env and logging config it writes with a per-user key; anything
else (edited, copied in, restored, sealed by another user) is untrusted."""

from __future__ import annotations

import stat

import yaml

from yolotui.runs.runconfig import is_trusted, read_run_config, untrusted_fields, write_run_config

CONFIG = {"name": "r", "backend": "exec", "command": ["python", "train.py"], "env": {"A": "1"}}


def test_what_yolotui_writes_is_trusted_and_the_key_is_private(tmp_path, yolotui_home):
    write_run_config(tmp_path, dict(CONFIG))
    config = read_run_config(tmp_path)
    assert is_trusted(config) and untrusted_fields(config) == {}
    key = yolotui_home / "config" / "trust.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_bytes()) >= 32


def test_an_edited_command_or_env_is_untrusted(tmp_path):
    write_run_config(tmp_path, dict(CONFIG))
    config = read_run_config(tmp_path)
    config["command"] = ["/bin/sh", "-c", "touch PWNED"]
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config))  # the old seal kept, the command changed
    assert list(untrusted_fields(read_run_config(tmp_path))) == ["command", "env"]
    assert list(untrusted_fields(read_run_config(tmp_path), ("command",))) == ["command"]


def test_a_restored_or_foreign_run_yaml_is_untrusted(tmp_path, monkeypatch):
    write_run_config(tmp_path / "restored", dict(CONFIG), trusted=False)
    assert not is_trusted(read_run_config(tmp_path / "restored"))
    write_run_config(tmp_path / "theirs", dict(CONFIG))
    monkeypatch.setenv("YOLOTUI_HOME", str(tmp_path / "another-user"))  # another key: their seal is not ours
    assert not is_trusted(read_run_config(tmp_path / "theirs"))
    assert "command" in untrusted_fields(read_run_config(tmp_path / "theirs"))


def test_a_tracker_record_does_not_vouch_for_an_untrusted_command(tmp_path):
    from yolotui.runs.trackers import update_record

    write_run_config(tmp_path, dict(CONFIG), trusted=False)
    assert update_record(tmp_path, "tensorboard", run_id="x")
    assert not is_trusted(read_run_config(tmp_path))
    write_run_config(tmp_path, dict(CONFIG))
    assert update_record(tmp_path, "tensorboard", run_id="y")
    assert is_trusted(read_run_config(tmp_path))
