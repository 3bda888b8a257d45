"""The shared seams: one formatter, one device parser, the backend registry and its two built-in backends."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from yolotui import formatting
from yolotui.backends import REGISTRY, backend_names, get_backend, register_backend
from yolotui.backends.base import ALL_REMEDIES, REMEDY_LR_SCALE, CommandRequest
from yolotui.devices import check_visible, parse_device, split_device
from yolotui.errors import UserError
from yolotui.placement.distributed import DistributedLaunch


def test_one_format_for_ages_sizes_durations_and_epochs():
    assert [formatting.age(s) for s in (42, 300, 3 * 3600, 30 * 3600, 3 * 86400)] == ["42s", "5m", "3h", "30h", "3d"]
    assert formatting.age(None) == "--" and formatting.age(None, unknown="-") == "-"
    assert [formatting.size(n) for n in (719, 3482, 101 * 2**20, 3 * 2**30)] == ["719 B", "3.4 KiB", "101.0 MiB",
                                                                                 "3.0 GiB"]
    assert [formatting.duration(s) for s in (245, 3723, 50 * 3600, -1)] == ["4:05", "1:02:03", "2d02h", "--"]
    assert formatting.epochs(3, 100) == "3/100" and formatting.epochs(3, None) == "3/?"


def test_one_device_parser():
    assert split_device("cpu") is None and split_device("") == [] and split_device("cuda:1") == [1]
    assert parse_device("0,1", count=2) == [0, 1] and parse_device("", count=0) is None
    with pytest.raises(UserError, match="listed twice"):
        split_device("0,0")
    with pytest.raises(UserError, match="cuda:2 does not exist"):
        parse_device("2", count=1)
    assert check_visible("cuda:1", [0, 1]) == "1"
    with pytest.raises(UserError, match="GPU 3 is not there"):
        check_visible("3", [0])


def test_registry_and_builtin_backends(tmp_path):
    assert {"yolotui", "engine", "exec"} <= set(backend_names())
    engine = get_backend("engine")
    assert engine is get_backend("engine") and engine.name == "yolotui" and get_backend(None).name == "yolotui"
    assert engine.supports("save_now") and engine.supports("mid_epoch_stop") and engine.remedies() == ALL_REMEDIES
    layout = DistributedLaunch(nproc_per_node=2)
    spec = engine.resume_command(CommandRequest(tmp_path, opt={"epochs": 3}, overrides={"epochs": 9, "device": None},
                                                layout=layout))
    assert spec.command[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert spec.command[-2:] == ["--epochs", "9"] and spec.extra["save_signal"] is True
    assert engine.outputs(tmp_path).last_pt == tmp_path / "weights" / "last.pt"
    plain = get_backend("exec")
    assert not plain.supports("save_now") and REMEDY_LR_SCALE not in plain.remedies()
    assert plain.new_run_command(CommandRequest(tmp_path, argv=("sleep", "1"))).command == ["sleep", "1"]
    with pytest.raises(UserError, match="reruns its own command unchanged"):
        plain.resume_command(CommandRequest(tmp_path, overrides={"epochs": 9}))
    (tmp_path / "run.yaml").write_text("command: [sleep, '1']\nenv: {A: b}\n")
    again = plain.resume_command(CommandRequest(tmp_path))
    assert again.command == ["sleep", "1"] and again.env == {"A": "b"} and again.extra["resume_first"] is True
    with pytest.raises(UserError, match="not known"):
        get_backend("nope")
    register_backend("broken-for-test", "yolotui.backends.nowhere:Nothing")
    try:
        with pytest.raises(UserError, match="cannot be loaded"):
            get_backend("broken-for-test")
    finally:
        REGISTRY.pop("broken-for-test")
    assert Path(engine.outputs(tmp_path).opt_yaml).name == "opt.yaml"
