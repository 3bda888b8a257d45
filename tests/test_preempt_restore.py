"""A spot machine end to end: preempt a yolotui training run mid-epoch (SIGTERM to every process of the run, as a
shutdown sends it), its mirror matches its manifest; delete the run folder and the state folder; restore it
from the mirror into a new project folder on "another machine", resume it: bit-identical model and EMA to a
run never interrupted.

Each trainer pays the torch import (~10 s on a loaded 2-core machine): the reference, the preempted run and
the resumed run are three of them, about a minute and a half in all.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pytest
import yaml
from runs_helpers import processes_of_run, reap_runs  # noqa: F401 - reap_runs is an autouse fixture
from spotkit import cli, wait_until
from trainkit import TEST_HYP_OVERRIDES, assert_same_weights, load, make_data, write_tiny_cfg

from yolotui.mirror.snapshot import describes, read_manifest, sha256_file
from yolotui.runs import lock
from yolotui.runs.events import read_events
from yolotui.runs.layout import ENDED_STATES
from yolotui.runs.results import read_rows
from yolotui.runs.status import effective_state, read_status


@pytest.fixture
def env(cli_env):
    return {**cli_env, "YOLOTUI_TORCH_THREADS": "1", "OMP_NUM_THREADS": "1"}


def _hyp_file(folder: Path) -> Path:
    from yolotui.config import load_hyp
    from yolotui.configs import resolve_hyp

    path = folder / "hyp.test.yaml"
    path.write_text(yaml.safe_dump({**load_hyp(resolve_hyp(None)), **TEST_HYP_OVERRIDES, "warmup_epochs": 3.0}))
    return path


def _train(env, shared: Path, project: Path, name: str, *flags: str) -> Path:
    """`yolotui train` the tiny model: 16 images, batch 2 (8 batches an epoch), 2 epochs, last.pt every batch."""
    done = cli(env, "train", "--cfg", str(shared / "tiny.yaml"), "--data", str(shared / "data" / "data.yaml"),
               "--hyp", str(shared / "hyp.test.yaml"), "--epochs", "2", "--batch", "2", "--img", "64",
               "--device", "cpu", "--workers", "0", "--project", str(project), "--name", name,
               "--save-period-min", "1e-7", *flags)
    assert done.returncode == 0, done.stdout + done.stderr
    return project / name


def _wait_ended(run_dir: Path, timeout: float = 300) -> str:
    return wait_until(lambda: effective_state(run_dir) if effective_state(run_dir) in ENDED_STATES else None,
                      timeout, f"{run_dir.name} to end; train.log:\n" + _tail(run_dir / "train.log"), interval=0.3)


def _tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-3000:]
    except OSError:
        return ""


def test_preempted_mid_epoch_mirrored_restored_elsewhere_and_resumed_exactly(tmp_path, env, yolotui_home):
    shared = tmp_path / "shared"  # the data set and model config, at the same path on both "machines"
    make_data(shared / "data", n_train=16, n_val=2, img=64)
    write_tiny_cfg(shared)
    _hyp_file(shared)
    mirror = tmp_path / "bucket"

    reference = _train(env, shared, tmp_path / "ref", "ref")
    spot = _train({**env, "YOLOTUI_STEP_DELAY_S": "1.0"}, shared, tmp_path / "machine-a", "spot",
                  "--mirror", str(mirror))
    assert _wait_ended(reference) == "finished", _tail(reference / "train.log")

    # A mid-epoch checkpoint, then the machine goes: SIGTERM to every process of the run at once.
    wait_until(lambda: any(e.get("type") == "checkpoint" and e.get("epoch") == 0 and e.get("step", 0) >= 1
                           for e in read_events(spot / "events.jsonl")), 240, "a mid-epoch checkpoint")
    live = read_status(spot)
    os.killpg(live.supervisor_pid, signal.SIGTERM)  # the supervisor leads its session
    os.killpg(live.trainer_pid, signal.SIGTERM)  # the trainer leads its own
    for pid in processes_of_run(spot):  # and whatever else the run has (a mirror copy, ...)
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    assert _wait_ended(spot, 120) == "interrupted"
    wait_until(lambda: not lock.is_held(spot), 120, "the supervisor's last mirror copy and exit")
    status = read_status(spot)
    assert status.failure_class == "preempted", status.message
    assert status.stop["preempted"] and "SIGTERM" in status.stop["by"]
    assert "preempted" in status.message and "yolotui resume" in status.attempts[-1]["remedy"]
    stop = [e for e in read_events(spot / "events.jsonl") if e["type"] == "stop"]
    assert stop and stop[-1]["reason"] == "SIGTERM"
    manifest = read_manifest(spot / "weights" / "last.pt.json")[0]
    assert manifest["step"] > 0  # a mid-epoch checkpoint, written on SIGTERM

    # The mirror holds that very checkpoint, matching its manifest, and the final status.
    mirrored = mirror / "spot"
    assert describes(read_manifest(mirrored / "weights" / "last.pt.json")[0],
                     sha256_file(mirrored / "weights" / "last.pt"), (mirrored / "weights" / "last.pt").stat().st_size)
    assert sha256_file(mirrored / "weights" / "last.pt") == sha256_file(spot / "weights" / "last.pt")
    assert read_manifest(mirrored / "status.json")[0]["failure_class"] == "preempted"
    assert status.mirror["state"] == "ok" and status.mirror["last_ok_step"] == manifest["step"]
    assert not list(mirrored.rglob("*.tmp")) and not list(mirrored.rglob("*.next"))

    # The machine is gone: its run folder and yolotui's state folder with it.
    shutil.rmtree(tmp_path / "machine-a")
    shutil.rmtree(yolotui_home)
    restored = cli(env, "restore", str(mirrored), "--project", str(tmp_path / "machine-b"))
    assert restored.returncode == 0, restored.stdout + restored.stderr
    run_dir = tmp_path / "machine-b" / "spot"
    assert f"restored spot from {mirrored} into {run_dir}" in restored.stdout
    listed = cli(env, "ls")
    assert "spot" in listed.stdout and "interrupted" in listed.stdout, listed.stdout
    assert read_status(run_dir).run_dir == str(run_dir)

    started = time.monotonic()
    resumed = cli(env, "resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert _wait_ended(run_dir) == "finished", _tail(run_dir / "train.log")
    ours, theirs = load(run_dir / "weights" / "last.pt"), load(reference / "weights" / "last.pt")
    assert_same_weights(ours, theirs)  # model and EMA, tensor for tensor
    assert ours["updates"] == theirs["updates"]
    rows, ref_rows = read_rows(run_dir / "results.csv"), read_rows(reference / "results.csv")
    assert [int(r["epoch"]) for r in rows] == [0, 1] and rows == ref_rows
    starts = [e for e in read_events(run_dir / "events.jsonl") if e["type"] == "start"]
    assert starts[-1]["resumed_from"]["step"] == manifest["step"]
    assert time.monotonic() - started < 300
