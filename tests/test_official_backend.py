"""The official backend against the stand-in official repository (tests/official_standin, no code copied).

End to end through the CLI and the detached supervisor: a crash mid-run is retried with the official
`--resume RUN/weights/last.pt` and the run ends with exactly `epochs` results rows; a SIGKILLed run resumes with
`yolotui resume`; a training that printed "N epochs completed" and failed afterwards is finished; the OOM remedy
halves the batch in opt.yaml (kept as opt.yaml.orig); `yolotui exec -- python train_dual.py` is recognised.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.runs_helpers import reap_runs, wait_for  # noqa: F401  (reap_runs: autouse fixture)
from yolotui.jobs.doctor import diagnose_run
from yolotui.runs.results import read_rows
from yolotui.runs.status import effective_state, read_status

STANDIN = Path(__file__).resolve().parent / "official_standin"
ENDED = ("finished", "failed", "stopped")


def yolotui(args, env, cwd, check=True):
    proc = subprocess.run([sys.executable, "-m", "yolotui", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def ended(run_dir: Path) -> str | None:
    state = effective_state(run_dir)
    return state if state in ENDED else None


def events(run_dir: Path) -> list[dict]:
    from runs_helpers import run_events

    return run_events(run_dir)


@pytest.fixture
def env(cli_env):
    cli_env = dict(cli_env)
    cli_env["STANDIN_BATCH_S"] = "0.01"
    return cli_env


def train(tmp_path, env, *flags, name="run"):
    proc = yolotui(["train", "--backend", "official", "--repo", str(STANDIN), "--python", sys.executable,
                    "--restart-backoff", "0", "--epochs", "3", "--batch-size", "4", "--project",
                    str(tmp_path / "runs"), "--name", name, *flags], env, tmp_path)
    return tmp_path / "runs" / name, proc


def test_crash_mid_run_retries_with_official_resume_and_ends_with_one_row_per_epoch(tmp_path, env):
    env["STANDIN_CRASH_ONCE"] = str(tmp_path / "crashed")  # after epoch 1's results row, before its last.pt
    run_dir, proc = train(tmp_path, env)
    assert "weights_only=True by default" in proc.stdout  # the launch says how torch>=2.6 loads are handled
    assert wait_for(lambda: ended(run_dir), timeout=60) == "finished", read_status(run_dir)
    status = read_status(run_dir)
    assert len(status.attempts) == 2
    first, second = (a["command"] for a in status.attempts)
    assert "--resume" not in first
    assert second[-2:] == ["--resume", str(run_dir / "weights" / "last.pt")]
    assert [int(r["epoch"]) for r in read_rows(run_dir / "results.csv")] == [0, 1, 2]
    evs = events(run_dir)
    assert [e["epoch"] for e in evs if e["type"] == "epoch"] == [0, 1, 2]  # the redone epoch is not counted twice
    start = [e for e in evs if e["type"] == "start"][-1]
    assert start["resumed_from"]["epoch"] == 1 and start["epochs"] == 3
    run_yaml = yaml.safe_load((run_dir / "run.yaml").read_text())
    assert run_yaml["backend"] == "official"
    assert run_yaml["official"]["repo"] == str(STANDIN) and run_yaml["official"]["save_dir"] == str(run_dir)
    assert run_yaml["official"]["python"] == sys.executable


def test_sigkilled_run_resumes_with_yolotui_resume(tmp_path, env):
    env["STANDIN_BATCH_S"] = "0.15"
    run_dir, _ = train(tmp_path, env)
    # the official torch.save is not atomic: kill after a checkpoint event (the shim emits it once written)
    wait_for(lambda: (run_dir / "events.jsonl").exists() and any(e["type"] == "checkpoint" for e in events(run_dir)),
             timeout=60)
    os.kill(read_status(run_dir).trainer_pid, signal.SIGKILL)
    assert wait_for(lambda: ended(run_dir), timeout=30) == "failed"
    assert read_status(run_dir).failure_class == "killed"
    env["STANDIN_BATCH_S"] = "0.01"
    proc = yolotui(["resume", str(run_dir)], env, tmp_path)
    assert "official --resume" in proc.stdout
    assert wait_for(lambda: ended(run_dir), timeout=60) == "finished", read_status(run_dir)
    assert read_status(run_dir).attempts[-1]["command"][-2:] == ["--resume", str(run_dir / "weights" / "last.pt")]
    assert [int(r["epoch"]) for r in read_rows(run_dir / "results.csv")] == [0, 1, 2]


def test_strip_optimizer_failure_without_the_shim_is_finished(tmp_path, env):
    """The stand-in run bare (not recognised: through sh), so strip_optimizer fails under torch >= 2.6."""
    run_dir = tmp_path / "runs" / "bare"
    script = f"{sys.executable} {STANDIN / 'train_dual.py'} --epochs 2 --project {run_dir.parent} --name bare " \
             "--exist-ok"
    yolotui(["exec", "--project", str(run_dir.parent), "--name", "bare", "--max-restarts", "2", "--", "sh", "-c",
             script], env, tmp_path)
    assert wait_for(lambda: ended(run_dir), timeout=60) == "finished", read_status(run_dir)
    status = read_status(run_dir)
    assert len(status.attempts) == 1 and status.attempts[0]["exit_code"] != 0  # it did fail, after completing
    assert "2 epochs completed" in status.message


def test_oom_remedy_halves_the_batch_in_opt_yaml(tmp_path, env):
    env.update(STANDIN_OOM_ABOVE="2", STANDIN_OOM_EPOCH="1")  # out of memory from epoch 1 at batch > 2
    run_dir, _ = train(tmp_path, env)
    assert wait_for(lambda: ended(run_dir), timeout=60) == "finished", read_status(run_dir)
    opt = yaml.safe_load((run_dir / "opt.yaml").read_text())
    orig = yaml.safe_load((run_dir / "opt.yaml.orig").read_text())
    assert (orig["batch_size"], opt["batch_size"]) == (4, 2)
    status = read_status(run_dir)
    assert status.remedies[0]["failure_class"] == "oom"
    assert status.remedies[0]["settings"]["batch_size"] == [4, 2]
    assert "--resume" in status.attempts[1]["command"]
    assert [int(r["epoch"]) for r in read_rows(run_dir / "results.csv")] == [0, 1, 2]


def test_exec_recognises_the_official_script(tmp_path, env):
    proc = yolotui(["exec", "--max-restarts", "0", "--", sys.executable, str(STANDIN / "train_dual.py"),
                    "--epochs", "2", "--project", str(tmp_path / "runs"), "--name", "viaexec"], env, tmp_path)
    run_dir = tmp_path / "runs" / "viaexec"
    assert "recognised the official trainer" in proc.stderr
    assert wait_for(lambda: ended(run_dir), timeout=60) == "finished", read_status(run_dir)
    config = yaml.safe_load((run_dir / "run.yaml").read_text())
    assert config["backend"] == "official" and config["official"]["script"] == "train_dual.py"
    assert [int(r["epoch"]) for r in read_rows(run_dir / "results.csv")] == [0, 1]
    types = [e["type"] for e in events(run_dir)]
    assert types[0] == "start" and "batch" in types and "checkpoint" in types and types[-1] == "done"


def test_failure_after_completion_is_finished_and_the_unstripped_run_extends(tmp_path, env):
    env["STANDIN_FAIL_AFTER"] = "1"  # fails after "3 epochs completed", before strip_optimizer
    run_dir, _ = train(tmp_path, env)
    assert wait_for(lambda: ended(run_dir), timeout=60) == "finished", read_status(run_dir)
    assert len(read_status(run_dir).attempts) == 1  # finished: never retried
    assert any(e["type"] == "warning" and e["kind"] == "post_training" for e in events(run_dir))
    diagnosis = diagnose_run(run_dir, environment=False, logind=False)
    assert diagnosis.recommended == "extend-or-finetune" and diagnosis.drift == []
    assert f"yolotui resume {run_dir.name} --epochs N" in diagnosis.advice
    assert not any("older than best.pt" in note or "behind best.pt" in note for note in diagnosis.notes)
    proc = yolotui(["resume", str(run_dir)], env, tmp_path, check=False)
    assert proc.returncode != 0 and "extend it with --epochs" in proc.stderr
    env.pop("STANDIN_FAIL_AFTER")
    proc = yolotui(["resume", str(run_dir), "--epochs", "5"], env, tmp_path)
    assert "extending from epoch 3 to 5" in proc.stdout
    assert wait_for(lambda: ended(run_dir), timeout=60) == "finished", read_status(run_dir)
    assert [int(r["epoch"]) for r in read_rows(run_dir / "results.csv")] == [0, 1, 2, 3, 4]
    assert yaml.safe_load((run_dir / "opt.yaml.orig").read_text())["epochs"] == 3
    assert diagnose_run(run_dir, environment=False, logind=False).drift == []  # resume rewrote cfg/weights
    # now stripped (epoch -1): the official trainer cannot extend it; a fine-tune is offered
    proc = yolotui(["resume", str(run_dir), "--epochs", "8"], env, tmp_path, check=False)
    assert proc.returncode != 0 and "stripped" in proc.stderr and "finetune" in proc.stderr
    diagnosis = diagnose_run(run_dir, environment=False, logind=False)
    assert diagnosis.recommended == "finetune" and "finetune --backend official" in diagnosis.advice
    # fine-tune with the official trainer: --weights best.pt --freeze N, lr0 / 10, new data
    data = tmp_path / "new.yaml"
    data.write_text("train: a\nval: b\nnc: 1\nnames: [x]\n")
    proc = yolotui(["finetune", "--backend", "official", "--from", str(run_dir), "--data", str(data), "--epochs",
                    "2", "--freeze", "10", "--python", sys.executable], env, tmp_path)
    ft_dir = run_dir.parent / "run-ft"
    assert wait_for(lambda: ended(ft_dir), timeout=60) == "finished", read_status(ft_dir)
    command = read_status(ft_dir).attempts[0]["command"]
    assert command[command.index("--weights") + 1] == str(run_dir / "weights" / "best.pt")
    assert command[command.index("--freeze") + 1] == "10" and command[command.index("--data") + 1] == str(data)
    assert yaml.safe_load((ft_dir / "hyp.yaml").read_text())["lr0"] == pytest.approx(0.001)
    assert [int(r["epoch"]) for r in read_rows(ft_dir / "results.csv")] == [0, 1]
