"""SLURM launcher pieces that need no cluster: the batch script, options, storage check, job-state mapping."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from yolotui.errors import UserError
from yolotui.placement import slurm
from yolotui.placement.slurm import SlurmOptions, make_options, multi_node_command, script_text
from yolotui.runs import slurm_state


def test_script_has_every_option_and_execs_the_supervisor(tmp_path):
    opts = SlurmOptions(partition="gpu", gres="gpu:4", gpus="4", nodes=1, ntasks_per_node=1, cpus_per_task=8,
                        time="1-00:00:00", account="proj", qos="high", sbatch_args=["--mem=64G", "--exclusive"],
                        signal_lead_s=120)
    text = script_text(tmp_path / "run", opts, "exp", python="/opt/py/bin/python", pythonpath="/src")
    lines = text.splitlines()
    for line in ("#SBATCH --partition=gpu", "#SBATCH --gres=gpu:4", "#SBATCH --gpus=4", "#SBATCH --nodes=1",
                 "#SBATCH --ntasks-per-node=1", "#SBATCH --cpus-per-task=8", "#SBATCH --time=1-00:00:00",
                 "#SBATCH --account=proj", "#SBATCH --qos=high", "#SBATCH --mem=64G", "#SBATCH --exclusive",
                 "#SBATCH --signal=B:USR1@120", "#SBATCH --requeue", "#SBATCH --open-mode=append",
                 f"#SBATCH --output={tmp_path / 'run' / 'slurm.log'}", f"#SBATCH --chdir={tmp_path / 'run'}"):
        assert line in lines, line
    # every #SBATCH line comes before the first command, or sbatch ignores it
    first_command = next(i for i, line in enumerate(lines) if line and not line.startswith("#"))
    assert max(i for i, line in enumerate(lines) if line.startswith("#SBATCH")) < first_command
    assert lines[-1].startswith(f"exec /opt/py/bin/python -m yolotui.supervisor.slurm_job {tmp_path / 'run'}")
    assert "export PYTHONPATH=/src" in text
    assert "PET_" not in text  # one node: no rendezvous
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


def test_script_for_several_nodes_takes_the_rendezvous_from_slurm(tmp_path):
    text = script_text(tmp_path, SlurmOptions(nodes=4, gpus="8"), "big", python="python")
    assert "#SBATCH --nodes=4" in text
    assert 'export PET_NNODES="$SLURM_JOB_NUM_NODES"' in text
    assert 'export PET_RDZV_ENDPOINT="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1):29500"' in text
    assert 'export PET_RDZV_ID="$SLURM_JOB_ID"' in text
    assert "export PET_RDZV_BACKEND=c10d" in text
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


def test_multi_node_command_is_srun_of_torchrun_without_the_local_layout():
    local = ["/py", "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", "0", "--nproc-per-node", "4",
             "--rdzv-endpoint=host:29500", "--rdzv-backend", "c10d", "-m", "yolotui.engine", "train", "--run-dir", "R"]
    argv = multi_node_command(local)
    assert argv[:4] == ["srun", "--ntasks-per-node=1", "--kill-on-bad-exit=1", "--export=ALL"]
    assert argv[4:] == ["/py", "-m", "torch.distributed.run", "--nproc-per-node", "4", "-m", "yolotui.engine",
                        "train", "--run-dir", "R"]
    plain = multi_node_command(["/py", "-m", "yolotui.engine", "train", "--run-dir", "R"], nproc_per_node=2)
    assert plain[4:9] == ["/py", "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    assert multi_node_command(["./train.sh", "x"])[-2:] == ["./train.sh", "x"]


def test_options_merge_settings_defaults_and_refuse_bad_values(yolotui_home):
    settings = yolotui_home / "config" / "settings.yaml"
    settings.parent.mkdir(parents=True)
    settings.write_text("theme: yolo-night\nslurm:\n  partition: gpu\n  time: '2:00:00'\n"
                        "  sbatch_args: ['--mem=8G']\n")
    opts = make_options({"time": "30", "sbatch_args": ["--exclusive"], "nodes": None})
    assert (opts.partition, opts.time, opts.sbatch_args) == ("gpu", "30", ["--mem=8G", "--exclusive"])
    with pytest.raises(UserError, match="--sbatch-arg"):
        make_options({"sbatch_args": ["mem=8G"]}, defaults={})
    with pytest.raises(UserError, match="--partition"):
        make_options({"partition": "a b"}, defaults={})
    with pytest.raises(UserError, match="--nodes"):
        make_options({"nodes": 0}, defaults={})
    settings.write_text("slurm:\n  partiton: gpu\n")
    with pytest.raises(UserError, match="unknown key.*partiton"):
        make_options({})
    settings.write_text("a: &x [1]\nslurm: *x\n")
    with pytest.raises(UserError, match="aliases"):
        make_options({})
    settings.write_text("slurm: [unclosed\n")
    with pytest.raises(UserError, match=r"settings.yaml line \d+"):
        make_options({})


def test_storage_note_single_node_shared_fs_and_local_disk(tmp_path, monkeypatch):
    import socket

    here = socket.gethostname().split(".")[0]
    note, warn = slurm.storage_note(tmp_path, nodes=[here])
    assert not warn and "only node is this machine" in note
    monkeypatch.setattr(slurm, "_mount_of", lambda _p: ("/local", "ext4"))
    note, warn = slurm.storage_note(tmp_path, nodes=["node1", "node2"])
    assert warn and "local disk" in note and "ext4" in note
    monkeypatch.setattr(slurm, "_mount_of", lambda _p: ("/shared", "nfs4"))
    note, warn = slurm.storage_note(tmp_path, nodes=["node1", "node2"])
    assert not warn and "nfs4" in note


def _fake_squeue(monkeypatch, lines: str | None) -> list[list[str]]:
    calls: list[list[str]] = []

    def fake_run(argv, timeout=slurm_state.QUERY_TIMEOUT_S):
        calls.append(argv)
        if argv[0] == "sacct":
            return None
        return lines

    monkeypatch.setattr(slurm, "_run", fake_run)
    monkeypatch.setattr(slurm_state, "_run", fake_run)
    slurm_state._CACHE.clear()
    return calls


def test_state_comes_from_the_job_not_the_lock(monkeypatch):
    calls = _fake_squeue(monkeypatch, "11|PENDING|Priority|(null)|1:00:00|1:00:00\n"
                                      "12|RUNNING|None|node7|0:42:10|1:00:00\n"
                                      "13|COMPLETED|None|node7|0:00|1:00:00\n")
    assert slurm_state.derived_state("queued", "11") == "queued"
    assert slurm_state.describe("11")["reason"] == "Priority"
    assert slurm_state.derived_state("running", "12") == "running"
    assert slurm_state.derived_state("queued", "12") == "queued"  # the supervisor has not written yet
    assert slurm_state.describe("12") == {"job_id": "12", "state": "RUNNING", "reason": "", "nodes": "node7",
                                    "time_left": "0:42:10"}
    assert slurm_state.short_text(slurm_state.describe("12")) == "job 12 on node7, 0:42:10 left"
    assert slurm_state.short_text(slurm_state.describe("11")) == "job 11 pending (Priority)"
    assert slurm_state.derived_state("running", "13") == "interrupted"  # the job ended without the supervisor's word
    assert slurm_state.derived_state("finished", "13") == "finished"
    assert slurm_state.derived_state("running", "99") == "interrupted"  # forgotten by SLURM
    # one listing for every lookup (cached), and one more look for job 99 missing from it: a listing taken just
    # before a submission by another process lacks the new job, and "missing" must be seen twice to mean ended
    assert sum(1 for c in calls if c[0] == "squeue") == 2
    assert not [c for c in calls if c[0] == "sacct"]  # listings never ask accounting, one call per job
    slurm_state.describe("99", accounting=True)  # status/doctor of one run do
    assert any(c[0] == "sacct" and "99" in c for c in calls)


def test_without_squeue_the_recorded_state_is_shown(monkeypatch):
    _fake_squeue(monkeypatch, None)
    assert slurm_state.derived_state("running", "12") == "running"
    assert slurm_state.describe("12")["state"].startswith("unknown")


def test_effective_state_and_summary_use_the_job(tmp_path, monkeypatch):
    from yolotui.runs.status import RunStatus, effective_state, write_status
    from yolotui.runs.summary import summarize

    _fake_squeue(monkeypatch, "21|PENDING|Resources|(null)|10:00|10:00\n")
    write_status(tmp_path, RunStatus(name="r", run_dir=str(tmp_path), state="queued", slurm={"job_id": "21"}))
    assert effective_state(tmp_path) == "queued"  # no lock is held, yet the run is live: the job is pending
    summary = summarize(tmp_path)
    assert summary.state == "queued" and summary.slurm["reason"] == "Resources"
    write_status(tmp_path, RunStatus(name="r", run_dir=str(tmp_path), state="queued"))
    assert effective_state(tmp_path) == "interrupted"  # a local run without its supervisor


def test_cli_flags_are_wired(cli_env):
    for command in ("train", "resume", "finetune", "exec"):
        out = subprocess.run([sys.executable, "-m", "yolotui", command, "--help"], capture_output=True, text=True,
                             env=cli_env, timeout=60).stdout
        for flag in ("--slurm", "--partition", "--gres", "--gpus", "--nodes", "--ntasks-per-node", "--time",
                     "--account", "--qos", "--sbatch-arg"):
            assert flag in out, (command, flag)


def test_submit_refuses_a_non_job_id_answer(tmp_path, monkeypatch):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "sbatch").write_text("#!/bin/sh\necho 'sbatch: error: Batch job submission failed: Invalid account' >&2\n"
                                 "exit 1\n")
    (fake / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{Path(sys.executable).parent}:/usr/bin:/bin")
    with pytest.raises(UserError, match="Invalid account"):
        slurm.submit(tmp_path)


def test_tui_runs_table_and_dashboard_reader_show_the_job(tmp_path, monkeypatch):
    from yolotui.runs.status import RunStatus, write_status
    from yolotui.runs.summary import summarize
    from yolotui.tui.home_data import HomeRow
    from yolotui.tui.runview import RunReader
    from yolotui.tui.widgets.run_cells import cells as row_cells

    _fake_squeue(monkeypatch, "31|RUNNING|None|node3|0:10:00|1:00:00\n")
    write_status(tmp_path, RunStatus(name="r", run_dir=str(tmp_path), state="running", device="0",
                                     slurm={"job_id": "31"}))
    view = RunReader(tmp_path).refresh()
    assert view.state == "running" and view.slurm["nodes"] == "node3" and view.slurm["time_left"] == "0:10:00"
    cells = row_cells(HomeRow(summarize(tmp_path), None), 0.0)
    assert cells[-1] == "0 job 31 on node3, 0:10:00 left"


def test_boot_time_resume_leaves_slurm_runs_to_slurm(tmp_path, monkeypatch):
    from yolotui.placement.service import interrupted_runs
    from yolotui.runs import index
    from yolotui.runs.status import RunStatus, write_status

    _fake_squeue(monkeypatch, "")  # squeue answers: neither job exists any more
    local, job = tmp_path / "local", tmp_path / "job"
    for folder, slurm_record in ((local, None), (job, {"job_id": "41"})):
        folder.mkdir()
        write_status(folder, RunStatus(name=folder.name, run_dir=str(folder), state="running", slurm=slurm_record))
        index.add(folder, folder.name)
    assert interrupted_runs() == [local]


def test_torchrun_reads_the_rendezvous_slurm_sh_exports(cli_env):
    """torchrun takes its node layout from PET_* variables: the ones slurm.sh sets for a several-node job."""
    code = ("from torch.distributed.run import get_args_parser as p\n"
            "a = p().parse_args(['--nproc-per-node', '2', '-m', 'yolotui.engine', 'train'])\n"
            "print(a.nnodes, a.rdzv_endpoint, a.rdzv_id, a.rdzv_backend)\n")
    env = {**cli_env, "PET_NNODES": "3", "PET_RDZV_ENDPOINT": "node1:29500", "PET_RDZV_ID": "4242",
           "PET_RDZV_BACKEND": "c10d"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.stdout.split() == ["3", "node1:29500", "4242", "c10d"], out.stderr[-2000:]
    text = script_text(Path("/r"), SlurmOptions(nodes=3), "x", python="python")
    for name in ("PET_NNODES", "PET_RDZV_ENDPOINT", "PET_RDZV_ID", "PET_RDZV_BACKEND"):
        assert f"export {name}=" in text


def test_doctor_shows_the_job_and_the_storage_check(tmp_path, monkeypatch):
    from yolotui.health.report import render_text
    from yolotui.jobs.doctor import diagnose_run
    from yolotui.runs.runconfig import write_run_config
    from yolotui.runs.status import RunStatus, write_status

    _fake_squeue(monkeypatch, "51|PENDING|QOSMaxJobsPerUserLimit|(null)|1:00:00|1:00:00\n")
    write_run_config(tmp_path, {"name": "r", "command": ["x"], "slurm": {"job_ids": ["51"], "storage": "on nfs4"}})
    write_status(tmp_path, RunStatus(name="r", run_dir=str(tmp_path), state="queued", slurm={"job_id": "51"}))
    diagnosis = diagnose_run(tmp_path, environment=False, logind=False)
    assert diagnosis.state == "queued" and diagnosis.slurm["reason"] == "QOSMaxJobsPerUserLimit"
    text = render_text(diagnosis)
    assert "slurm     job 51 pending (QOSMaxJobsPerUserLimit) [PENDING]" in text and "on nfs4" in text


def test_slurm_launch_without_sbatch_says_so_before_anything_changes(tmp_path, monkeypatch):
    from yolotui.placement.launcher import launch

    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(UserError, match="sbatch not found"):
        launch(tmp_path / "run", [sys.executable, "-c", "pass"], name="run", slurm=SlurmOptions())
    assert not (tmp_path / "run").exists()


def test_a_job_submitted_since_the_cached_listing_is_found(monkeypatch):
    answers = ["", "61|PENDING|Priority|(null)|1:00|1:00\n", ""]
    calls: list[list[str]] = []

    def fake_run(argv, timeout=slurm_state.QUERY_TIMEOUT_S):
        calls.append(argv)
        return answers[min(len(calls) - 1, len(answers) - 1)]

    monkeypatch.setattr(slurm, "_run", fake_run)
    monkeypatch.setattr(slurm_state, "_run", fake_run)
    slurm_state._CACHE.clear()
    assert slurm_state.job_info("60") is None  # a fresh listing: not looked for again
    assert slurm_state.job_info("61").state == "PENDING"  # submitted by another process since: one more listing
    assert len(calls) == 2
    assert slurm_state.job_info("62") is None and len(calls) == 3  # gone: one look
    assert slurm_state.job_info("62") is None and len(calls) == 3  # and not again
