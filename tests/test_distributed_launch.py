"""Process layouts under torchrun: CPU world sizes, GPU lists, multi-node rendezvous, --sync-bn; one real
2-process gloo run through `yolotui train --device cpu --nproc-per-node 2`."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from trainkit import TEST_HYP_OVERRIDES, make_data, make_run, write_tiny_cfg

from yolotui.backends.engine.backend import engine_command
from yolotui.cli import main
from yolotui.config import default_options, opt_yaml_dict, validate_options
from yolotui.engine.train.ddp import DistInfo, convert_sync_bn, rank_device
from yolotui.errors import UserError
from yolotui.placement.distributed import DistributedLaunch, plan_launch, saved_layout, sync_bn_warning
from yolotui.runs import lock
from yolotui.runs.events import read_events
from yolotui.runs.layout import ENDED_STATES
from yolotui.runs.results import read_rows
from yolotui.runs.status import effective_state

TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
TRAINER = ["-m", "yolotui.engine", "train", "--run-dir"]


def test_cpu_world_size_runs_standalone_torchrun(tmp_path):
    plan, _ = plan_launch("cpu", 4, {"nproc_per_node": 2})
    assert (plan.world_size, plan.env()) == (2, {})
    argv = engine_command(tmp_path, None, launch=plan)
    assert argv == [*TORCHRUN, "--standalone", "--nproc-per-node=2", *TRAINER, str(tmp_path)]
    single, _ = plan_launch("cpu", 4, {})
    assert engine_command(tmp_path, {"epochs": 5}, launch=single) == [sys.executable, *TRAINER, str(tmp_path),
                                                                        "--epochs", "5"]


def test_gpu_list_gives_one_process_per_gpu_and_their_visibility(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    plan, _ = plan_launch("2,3", 4, {})
    assert plan.nproc_per_node == 2 and plan.env() == {"CUDA_VISIBLE_DEVICES": "2,3"}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")  # --device counts within what is visible
    assert plan_launch("1,3", 4, {})[0].env() == {"CUDA_VISIBLE_DEVICES": "5,7"}
    assert plan_launch("0", 4, {})[0].uses_torchrun is False
    with pytest.raises(UserError, match="one process per listed GPU"):
        plan_launch("0,1", 4, {"nproc_per_node": 4})


def test_multi_node_rendezvous_flags_pass_through():
    c10d, _ = plan_launch("0,1", 8, {"nnodes": 2, "node_rank": 1, "rdzv_endpoint": "node0:29400",
                                     "rdzv_id": "job7"})
    assert c10d.world_size == 4
    assert c10d.torchrun_args() == ["--nnodes=2", "--nproc-per-node=2", "--rdzv-backend=c10d",
                                    "--rdzv-endpoint=node0:29400", "--rdzv-id=job7", "--node-rank=1"]
    static, _ = plan_launch("cpu", 4, {"nnodes": 2, "node_rank": 0, "master_addr": "10.0.0.1",
                                       "master_port": 29500})
    assert static.torchrun_args() == ["--nnodes=2", "--nproc-per-node=1", "--node-rank=0",
                                      "--master-addr=10.0.0.1", "--master-port=29500"]
    assert static.uses_torchrun  # one process per node, two nodes: still DDP


@pytest.mark.parametrize(("layout", "batch", "message"), [
    ({"nnodes": 2}, 4, "say where the nodes meet"),
    ({"nnodes": 2, "node_rank": 2, "rdzv_endpoint": "h:1"}, 4, "between 0 and"),
    ({"node_rank": 1}, 4, "single-node job"),
    ({"nnodes": 2, "rdzv_endpoint": "host"}, 4, "HOST:PORT"),
    ({"rdzv_id": "x"}, 4, "goes with --rdzv-endpoint"),
    ({"nnodes": 2, "rdzv_endpoint": "h:1", "master_addr": "h", "master_port": 2}, 4, "give one"),
    ({"nnodes": 2, "master_addr": "h", "master_port": 2}, 4, "--node-rank"),
    ({"master_addr": "h"}, 4, "needs --master-port"),
    ({"nproc_per_node": 0}, 4, "at least 1"),
    ({"nproc_per_node": 3}, 4, "multiple of the 3"),
])
def test_bad_layouts_are_one_line_errors(layout, batch, message):
    with pytest.raises(UserError, match=message) as info:
        plan_launch("cpu", batch, layout)
    assert "\n" not in str(info.value)


def test_launch_record_roundtrips():
    plan, _ = plan_launch("cpu", 4, {"nproc_per_node": 2})
    assert DistributedLaunch.from_dict({**plan.to_dict(), "future_key": 1}) == plan


def _capture_launch(monkeypatch) -> list[dict]:
    calls: list[dict] = []

    def fake_launch(run_dir, command, **kwargs):
        calls.append({"run_dir": Path(run_dir), "command": list(command), **kwargs})
        lock.release(kwargs.get("lock_fd"))  # launch() owns the caller's lock descriptor and closes it

    monkeypatch.setattr("yolotui.placement.launcher.launch", fake_launch)
    return calls


def test_train_cli_builds_the_torchrun_command(tmp_path, monkeypatch, capsys):
    calls = _capture_launch(monkeypatch)
    data = make_data(tmp_path / "data", n_train=2, n_val=1, img=64)
    code = main(["train", "--cfg", str(write_tiny_cfg(tmp_path)), "--data", str(data), "--device", "cpu",
                 "--nproc-per-node", "2", "--batch", "4", "--epochs", "1", "--sync-bn",
                 "--project", str(tmp_path / "runs"), "--name", "cpu2"])
    assert code == 0
    out = capsys.readouterr().out
    assert "--sync-bn has no effect on the CPU" in out
    (call,) = calls
    assert call["command"][:5] == [*TORCHRUN, "--standalone", "--nproc-per-node=2"]
    assert call["extra"]["distributed"]["flags"] == {"nproc_per_node": 2}
    assert call["extra"]["options"]["sync_bn"] is True
    assert yaml.safe_load((tmp_path / "runs" / "cpu2" / "opt.yaml").read_text())["sync_bn"] is True


def test_bad_layout_is_refused_before_anything_detaches(tmp_path, monkeypatch, capsys):
    calls = _capture_launch(monkeypatch)
    data = make_data(tmp_path / "data", n_train=2, n_val=1, img=64)
    code = main(["train", "--cfg", str(write_tiny_cfg(tmp_path)), "--data", str(data), "--device", "cpu",
                 "--nnodes", "2", "--batch", "4", "--project", str(tmp_path / "runs"), "--name", "bad"])
    assert code == 2 and not calls
    assert "--nnodes 2: say where the nodes meet" in capsys.readouterr().err
    assert not (tmp_path / "runs" / "bad").exists()


def _resumable_run(tmp_path: Path, flags: dict) -> Path:
    from tui_fixtures import write_checkpoint

    run_dir = make_run(tmp_path, "res", epochs=3, batch_size=4)
    # a resumable last.pt (resume checks its verdict before anything detaches)
    write_checkpoint(run_dir, "last.pt", epoch=1, epochs=3, mtime=time.time())
    (run_dir / "run.yaml").write_text(yaml.safe_dump({"name": "res", "command": ["x"],
                                                      "distributed": {"nproc_per_node": 2, "flags": flags}}))
    return run_dir


def test_resume_relaunches_the_saved_layout_and_takes_new_flags(tmp_path, monkeypatch, capsys):
    from yolotui.jobs.resume import ResumeRequest, resume

    calls = _capture_launch(monkeypatch)
    run_dir = _resumable_run(tmp_path, {"nproc_per_node": 2})
    assert saved_layout(run_dir) == {"nproc_per_node": 2}
    resume(ResumeRequest(str(run_dir)))
    assert "--nproc-per-node=2" in calls[-1]["command"]
    resume(ResumeRequest(str(run_dir), layout={"nproc_per_node": 4}))
    assert "--nproc-per-node=4" in calls[-1]["command"]
    resume(ResumeRequest(str(run_dir), device="cpu"))  # a new device list re-derives the process count
    assert "torch.distributed.run" not in calls[-1]["command"]


def test_sync_bn_conversion_only_under_ddp_on_gpus():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.BatchNorm2d(4), torch.nn.Conv2d(4, 4, 1),
                                torch.nn.BatchNorm2d(4))
    two = DistInfo(rank=0, local_rank=0, world_size=2)
    same, count = convert_sync_bn(model, True, two, cuda=False)
    assert count == 0 and not any(isinstance(m, torch.nn.SyncBatchNorm) for m in same.modules())
    assert convert_sync_bn(model, True, DistInfo(), cuda=True)[1] == 0  # a single process
    assert convert_sync_bn(model, False, two, cuda=True)[1] == 0
    converted, count = convert_sync_bn(model, True, two, cuda=True)
    assert count == 2 and sum(isinstance(m, torch.nn.SyncBatchNorm) for m in converted.modules()) == 2
    assert set(converted.state_dict()) == set(model.state_dict())  # checkpoints keep their keys


def test_sync_bn_warnings_and_option():
    cpu2 = DistributedLaunch(nproc_per_node=2)
    assert "on the CPU" in sync_bn_warning(True, "cpu", cpu2)
    assert "single process" in sync_bn_warning(True, "0", DistributedLaunch())
    assert sync_bn_warning(True, "0,1", cpu2) is None and sync_bn_warning(False, "cpu", cpu2) is None
    assert opt_yaml_dict(default_options())["sync_bn"] is False


def test_rank_device_on_the_cpu():
    assert rank_device(DistInfo(rank=1, local_rank=1, world_size=2), "cpu") == torch.device("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(UserError, match="has no GPU"):
            rank_device(DistInfo(rank=1, local_rank=1, world_size=2), "0,1")


def test_validated_options_keep_sync_bn(tmp_path):
    data = make_data(tmp_path / "data", n_train=2, n_val=1, img=64)
    opt, _ = validate_options(default_options(cfg=str(write_tiny_cfg(tmp_path)), data=str(data), sync_bn=True,
                                              device="cpu"))
    assert opt["sync_bn"] is True


def test_yolotui_train_two_cpu_processes_finishes(tmp_path, cli_env):
    """A real 2-process gloo run through the CLI and the supervisor (one epoch of 4 images)."""
    from yolotui.config import load_hyp
    from yolotui.configs import resolve_hyp

    hyp = tmp_path / "hyp.yaml"
    hyp.write_text(yaml.safe_dump({**load_hyp(resolve_hyp(None)), **TEST_HYP_OVERRIDES}))
    data = make_data(tmp_path / "data", n_train=4, n_val=2, img=64)
    env = {**cli_env, "YOLOTUI_TORCH_THREADS": "1", "OMP_NUM_THREADS": "1"}
    argv = [sys.executable, "-m", "yolotui", "train", "--cfg", str(write_tiny_cfg(tmp_path)), "--data", str(data),
            "--hyp", str(hyp), "--epochs", "1", "--batch", "4", "--img", "64", "--device", "cpu", "--workers", "0",
            "--nproc-per-node", "2", "--project", str(tmp_path / "runs"), "--name", "cpu2"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    run_dir = tmp_path / "runs" / "cpu2"
    deadline = time.monotonic() + 150
    while effective_state(run_dir) not in ENDED_STATES:
        assert time.monotonic() < deadline, (run_dir / "train.log").read_text()[-3000:]
        time.sleep(0.5)
    assert effective_state(run_dir) == "finished", (run_dir / "train.log").read_text()[-3000:]
    start = read_events(run_dir / "events.jsonl")[0]
    assert start["type"] == "start" and start["world_size"] == 2
    assert [int(r["epoch"]) for r in read_rows(run_dir / "results.csv")] == [0]
