"""A SLURM job ended from outside (SIGTERM to the job: scancel, a preemption without requeue) takes the same
checkpoint-then-mirror path as a local preemption: the trainer checkpoints, the supervisor makes the mirror's
last copy before it exits, and the mirror matches the run. Runs against the one-node SLURM of tests/slurmkit.py
(.ci/slurm-up), like tests/test_slurm_cluster.py."""

from __future__ import annotations

import subprocess
import sys

import yaml
from runs_helpers import run_events
from slurmkit import bring_up, cancel_quietly, wait_for
from syspkg import needs
from trainkit import TEST_HYP_OVERRIDES, make_data, write_tiny_cfg

from yolotui.mirror.snapshot import describes, read_manifest, sha256_file
from yolotui.runs import lock
from yolotui.runs.status import effective_state, read_status


@needs("slurm", root=True)
def test_a_slurm_job_ended_from_outside_checkpoints_and_mirrors(tmp_path, monkeypatch):
    bring_up()
    from yolotui.config import load_hyp
    from yolotui.configs import resolve_hyp

    for name, value in (("YOLOTUI_TORCH_THREADS", "1"), ("OMP_NUM_THREADS", "1"), ("YOLOTUI_STEP_DELAY_S", "1")):
        monkeypatch.setenv(name, value)
    data = make_data(tmp_path / "data", n_train=8, n_val=2, img=64)
    hyp = tmp_path / "hyp.yaml"
    hyp.write_text(yaml.safe_dump({**load_hyp(resolve_hyp(None)), **TEST_HYP_OVERRIDES}))
    mirror = tmp_path / "mirror"
    done = subprocess.run([sys.executable, "-m", "yolotui", "train", "--cfg", str(write_tiny_cfg(tmp_path)),
                           "--data", str(data), "--hyp", str(hyp), "--epochs", "2", "--batch", "2", "--img", "64",
                           "--device", "cpu", "--workers", "0", "--project", str(tmp_path / "runs"), "--name", "job",
                           "--slurm", "--time", "10", "--mirror", str(mirror)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = tmp_path / "runs" / "job"
    job = str(read_status(run_dir).slurm["job_id"])
    try:
        wait_for(lambda: any(e["type"] == "batch" for e in run_events(run_dir))
                 if (run_dir / "events.jsonl").exists() else False, 180, "a first batch in the job")
        subprocess.run(["scancel", job], check=True, timeout=20)
        wait_for(lambda: effective_state(run_dir) == "interrupted", 90, "the run to be interrupted")
        wait_for(lambda: not lock.is_held(run_dir), 90, "the job's supervisor to make its last copy and exit")
        status = read_status(run_dir)
        assert status.attempts[-1]["failure_class"] == "killed"  # SLURM's rule: preempted once requeued
        assert status.mirror["state"] == "ok", status.mirror
        checkpoint = mirror / "job" / "weights" / "last.pt"
        assert sha256_file(checkpoint) == sha256_file(run_dir / "weights" / "last.pt")
        assert describes(read_manifest(checkpoint.with_name("last.pt.json"))[0], sha256_file(checkpoint),
                         checkpoint.stat().st_size)
        assert read_manifest(mirror / "job" / "status.json")[0]["state"] == "interrupted"
    finally:
        cancel_quietly(job)
