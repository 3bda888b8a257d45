"""Runs as SLURM jobs against a real one-node SLURM: time limit, pending reason, stop, save, scancel.

The `slurm_cluster` fixture (tests/slurmkit.py) starts munged, slurmctld and slurmd with .ci/slurm-up, or finds
them up; it skips only where that cannot work (not root, packages missing). Each job pays a torch import
(~10 s on a loaded machine); YOLOTUI_STEP_DELAY_S stretches a tiny training so SLURM's signals meet it
mid-training, without changing its math.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from runs_helpers import run_events
from slurmkit import bring_up, cancel_quietly, release_requeued, squeue_state, wait_for
from trainkit import assert_same_weights, load, make_data, make_run, start_trainer

from yolotui.config import load_yaml
from yolotui.runs.events import read_events
from yolotui.runs.results import read_rows
from yolotui.runs.runconfig import read_run_config
from yolotui.runs.status import effective_state, read_status

RUN = {"epochs": 3, "batch_size": 2}  # 8 images: 4 batches an epoch


@pytest.fixture(scope="session")
def slurm_cluster() -> str:
    """The one SLURM node (this host), up; skipped only where it cannot start (see slurmkit.bring_up)."""
    return bring_up()


@pytest.fixture
def job_env(monkeypatch):
    """The environment sbatch hands to the job (it exports the submitter's): one torch thread."""
    monkeypatch.setenv("YOLOTUI_TORCH_THREADS", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("PYTHONUNBUFFERED", "1")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_data(tmp_path_factory.mktemp("data"), n_train=8, n_val=2, img=64)


def _submit(run_dir: Path, **slurm: object) -> str:
    """Submit the run folder's training as `yolotui train --slurm` does; the job id."""
    from yolotui.jobs.launch import start_training
    from yolotui.placement.slurm import make_options

    opt = load_yaml(run_dir / "opt.yaml", "opt.yaml")
    start_training(run_dir, opt, max_attempts=2, slurm=make_options(dict(slurm), defaults={}))
    return str(read_status(run_dir).slurm["job_id"])


def _started(run_dir: Path, attempt: int = 1) -> bool:
    events = read_events(run_dir / "events.jsonl") if (run_dir / "events.jsonl").exists() else []
    return any(e["type"] == "start" and e.get("attempt") == attempt for e in events)


def _explain(run_dir: Path) -> str:
    """What a failed assertion shows: the status message and the tails of the supervisor's and the job's logs."""
    status = read_status(run_dir)
    parts = [f"status: {status.state if status else None}: {status.message if status else ''}"]
    for name in ("supervisor.log", "slurm.log"):
        path = run_dir / name
        tail = path.read_text(errors="replace").splitlines()[-15:] if path.exists() else ["(missing)"]
        parts.append(f"--- {name}\n" + "\n".join(tail))
    job = (status.slurm or {}).get("job_id") if status else None
    from yolotui.runs import slurm_state

    parts.append(f"--- yolotui's view: missing={sorted(slurm_state._CACHE.get('missing', ()))} "
                 f"cached={ {k: v for k, v in (slurm_state._CACHE.get('squeue') or (0, {}))[1].items()} if (slurm_state._CACHE.get('squeue') or (0, None))[1] else None}")
    for argv in (["squeue", "-h", "-t", "all", "-o", "%i|%T|%r|%N|%L"], ["scontrol", "show", "job", str(job)]):
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
            parts.append(f"--- {' '.join(argv)}\n{done.stdout.strip()}{done.stderr.strip()}")
        except (OSError, subprocess.SubprocessError) as exc:
            parts.append(f"--- {argv[0]}: {exc}")
    return "\n".join(parts)


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "yolotui", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_time_limit_checkpoints_requeues_and_resumes_exactly(slurm_cluster, tmp_path, data, job_env, monkeypatch):
    (tmp_path / "ref").mkdir()
    reference = make_run(tmp_path / "ref", "ref", data=data, **RUN)
    ref_proc = start_trainer(reference)  # the same training, never interrupted, beside the job
    run_dir = make_run(tmp_path, "timed", data=data, **RUN)
    monkeypatch.setenv("YOLOTUI_STEP_DELAY_S", "4")  # 12 batches: ~50 s, more than the first job life has left
    job = None
    try:
        job = _submit(run_dir, time="1", signal_lead_s=55)
        script = (run_dir / "slurm.sh").read_text()
        assert "#SBATCH --time=1" in script and "#SBATCH --signal=B:USR1@55" in script
        assert "#SBATCH --requeue" in script

        # SLURM sends USR1 55 s before the 1 minute limit: checkpoint, then the job requeues itself
        def requeued():
            status = read_status(run_dir)
            attempts = status.attempts if status else []
            return (attempts and attempts[0].get("failure_class") == "timelimit"
                    and squeue_state(job)[0] == "PENDING")

        wait_for(requeued, 150, "the time-limit checkpoint and requeue")
        pending_since = time.time()
        status = read_status(run_dir)
        assert status.state == "queued" and effective_state(run_dir) == "queued"
        ckpts = [e for e in read_events(run_dir / "events.jsonl") if e["type"] == "checkpoint"]
        assert ckpts, "no checkpoint was written on the time-limit signal"
        # SLURM holds a requeued job back ~2 minutes (BeginTime); release it now and give the second life of
        # the job room to finish (the test is about the resume, not about how often the limit comes)
        release_requeued(job, pending_since, "TimeLimit=10")
        wait_for(lambda: effective_state(run_dir) in ("finished", "failed", "interrupted", "stopped"), 240,
                 "the requeued job to finish")
        status = read_status(run_dir)
        assert effective_state(run_dir) == "finished", _explain(run_dir)
        assert [a.get("failure_class") for a in status.attempts] == ["timelimit", None]
        assert status.slurm["job_id"] == job and status.slurm["restarts"] == 1
        starts = [e for e in read_events(run_dir / "events.jsonl") if e["type"] == "start"]
        assert starts[-1]["attempt"] == 2 and starts[-1]["resumed_from"], starts[-1]
        assert "DUE TO JOB REQUEUE" in (run_dir / "slurm.log").read_text()
        record = read_run_config(run_dir)["slurm"]
        assert record["job_ids"] == [job] and record["submit_command"][0] == "sbatch"
    finally:
        cancel_quietly(job)
        ref_proc.wait(timeout=300)
    assert ref_proc.returncode == 0
    rows = read_rows(run_dir / "results.csv")
    assert [int(r["epoch"]) for r in rows] == [0, 1, 2]
    assert rows == read_rows(reference / "results.csv")  # no epoch counted twice, same numbers
    assert_same_weights(load(run_dir / "weights" / "last.pt"), load(reference / "weights" / "last.pt"))


def test_pending_job_shows_its_reason_then_stop_cancels_it(slurm_cluster, tmp_path):
    done = _cli("exec", "--slurm", "--sbatch-arg=--hold", "--project", str(tmp_path), "--name", "held", "--",
                "sleep", "60")
    assert done.returncode == 0, done.stderr
    run_dir = tmp_path / "held"
    job = str(read_status(run_dir).slurm["job_id"])
    try:
        assert "#SBATCH --hold" in (run_dir / "slurm.sh").read_text()
        listing = json.loads(_cli("ls", "--json").stdout)
        row = next(r for r in listing if r["name"] == "held")
        assert row["state"] == "queued"
        assert row["slurm"]["job_id"] == job and row["slurm"]["reason"] == "JobHeldUser"
        status_text = _cli("status", str(run_dir)).stdout
        assert f"job {job} pending (JobHeldUser)" in status_text
        stopped = _cli("stop", str(run_dir))
        assert stopped.returncode == 0, stopped.stderr
        assert effective_state(run_dir) == "stopped"
        assert wait_for(lambda: squeue_state(job)[0] in ("CANCELLED", ""), 30, "the job to be cancelled")
    finally:
        cancel_quietly(job)


def test_save_then_stop_ends_stopped_with_a_checkpoint(slurm_cluster, tmp_path, data, job_env, monkeypatch):
    run_dir = make_run(tmp_path, "stopme", data=data, epochs=50, batch_size=2)
    monkeypatch.setenv("YOLOTUI_STEP_DELAY_S", "1")
    job = None
    try:
        job = _submit(run_dir, time="10")
        wait_for(lambda: _started(run_dir), 120, "the trainer to start in the job")
        assert effective_state(run_dir) == "running"
        row = next(r for r in json.loads(_cli("ls", "--json").stdout) if r["name"] == "stopme")
        assert row["slurm"]["nodes"] == slurm_cluster and row["slurm"]["time_left"]
        saved = _cli("save", str(run_dir))
        assert saved.returncode == 0, saved.stderr
        wait_for(lambda: any(e["type"] == "checkpoint" for e in read_events(run_dir / "events.jsonl")), 60,
                 "the checkpoint asked for by yolotui save")
        assert read_status(run_dir).state == "running"  # a save goes on training
        refused = _cli("resume", str(run_dir))  # no second job on a live run folder
        assert refused.returncode != 0 and f"SLURM job {job}, still running" in refused.stderr
        stopped = _cli("stop", str(run_dir), timeout=150)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert effective_state(run_dir) == "stopped", read_status(run_dir).message
        events = read_events(run_dir / "events.jsonl")
        assert events[-1]["type"] == "stop" or any(e["type"] == "stop" for e in events[-3:])
        manifest = json.loads((run_dir / "weights" / "last.pt.json").read_text())
        last_ckpt = [e for e in events if e["type"] == "checkpoint"][-1]
        assert manifest["step"] == last_ckpt["step"] and manifest["step"] > 0
    finally:
        cancel_quietly(job)


def test_scancel_from_outside_leaves_it_interrupted_and_resumable(slurm_cluster, tmp_path, data, job_env,
                                                                   monkeypatch):
    hyp = tmp_path / "hyp.yaml"
    from trainkit import TEST_HYP_OVERRIDES, write_tiny_cfg

    from yolotui.config import load_hyp
    from yolotui.configs import resolve_hyp

    hyp.write_text(yaml.safe_dump({**load_hyp(resolve_hyp(None)), **TEST_HYP_OVERRIDES}))
    monkeypatch.setenv("YOLOTUI_STEP_DELAY_S", "1")
    done = _cli("train", "--cfg", str(write_tiny_cfg(tmp_path)), "--data", str(data), "--hyp", str(hyp),
                "--epochs", "2", "--batch", "2", "--img", "64", "--device", "cpu", "--workers", "0",
                "--project", str(tmp_path / "runs"), "--name", "cut", "--slurm", "--time", "10")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "submitted as SLURM job" in done.stdout and "run folder storage" in done.stdout
    run_dir = tmp_path / "runs" / "cut"
    job = str(read_status(run_dir).slurm["job_id"])
    second = None
    try:
        wait_for(lambda: _started(run_dir), 120, "the trainer to start in the job")
        wait_for(lambda: any(e["type"] == "batch" for e in run_events(run_dir)), 60,
                 "a first batch")
        subprocess.run(["scancel", job], check=True, timeout=20)
        wait_for(lambda: effective_state(run_dir) == "interrupted", 90, "the run to be interrupted")
        status = read_status(run_dir)
        assert status.attempts[-1]["failure_class"] == "killed", status.attempts
        assert (run_dir / "weights" / "last.pt").exists()
        resumed = _cli("resume", str(run_dir))  # resubmitted with the SLURM options run.yaml recorded
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        second = str(read_status(run_dir).slurm["job_id"])
        assert second != job and read_run_config(run_dir)["slurm"]["job_ids"] == [job, second]
        wait_for(lambda: effective_state(run_dir) in ("finished", "failed", "interrupted"), 180,
                 "the resumed job to finish")
        assert effective_state(run_dir) == "finished", _explain(run_dir)
        assert [int(r["epoch"]) for r in read_rows(run_dir / "results.csv")] == [0, 1]
        starts = [e for e in read_events(run_dir / "events.jsonl") if e["type"] == "start"]
        assert starts[-1]["resumed_from"]
    finally:
        cancel_quietly(job)
        cancel_quietly(second)


def test_requeue_from_outside_counts_as_preempted_and_resumes(slurm_cluster, tmp_path, data, job_env, monkeypatch):
    """What SLURM does to a preempted job with PreemptMode=REQUEUE: SIGTERM to the job, then queue it again."""
    run_dir = make_run(tmp_path, "preempt", data=data, epochs=2, batch_size=2)
    monkeypatch.setenv("YOLOTUI_STEP_DELAY_S", "1")
    job = None
    try:
        job = _submit(run_dir, time="10")
        wait_for(lambda: any(e["type"] == "batch" for e in run_events(run_dir))
                 if _started(run_dir) else False, 120, "the first batch in the job")
        subprocess.run(["scontrol", "requeue", job], check=True, timeout=20)
        wait_for(lambda: squeue_state(job)[0] == "PENDING", 60, "the requeued job to be pending")
        release_requeued(job, time.time())
        wait_for(lambda: effective_state(run_dir) in ("finished", "failed", "stopped") and
                 squeue_state(job)[0] != "PENDING", 180, "the requeued job to finish")
        status = read_status(run_dir)
        assert effective_state(run_dir) == "finished", _explain(run_dir)
        assert [a.get("failure_class") for a in status.attempts] == ["preempted", None], status.attempts
        assert [int(r["epoch"]) for r in read_rows(run_dir / "results.csv")] == [0, 1]
        starts = [e for e in read_events(run_dir / "events.jsonl") if e["type"] == "start"]
        assert starts[-1]["attempt"] == 2 and starts[-1]["resumed_from"]
    finally:
        cancel_quietly(job)
