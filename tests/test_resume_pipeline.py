"""The one resume pipeline, for every backend: two resumes at once start one trainer and the other is told why,
with nothing of the run changed by the loser; a run.yaml whose command, env or logging config this user's yolotui
did not write runs nothing without a `y` or --trust (run through the CLI, no terminal)."""

from __future__ import annotations

import pytest
import yaml
from resume_kit import engine_run, exec_run, official_run, resume_twice_at_once, ultralytics_run

from tests.runs_helpers import reap_runs, wait_for  # noqa: F401  (reap_runs: autouse fixture)
from yolotui.runs.events import read_events
from yolotui.runs.status import effective_state, read_status

FOREIGN = {"exec": (exec_run, []), "official": (official_run, ["--batch-size", "2"]),
           "ultralytics": (ultralytics_run, ["--batch-size", "2"])}
ENDED = ("finished", "failed", "stopped", "interrupted")


def _trainers(run_dir):
    path = run_dir / "trainers.txt"
    return path.read_text().splitlines() if path.exists() else []


def _one_winner(done):
    assert sorted(p.returncode for p in done) == [0, 1], [p.stdout + p.stderr for p in done]
    loser = next(p for p in done if p.returncode == 1)
    assert "is live, owned by" in loser.stderr and "nothing changed here" in loser.stderr
    assert len(loser.stderr.strip().splitlines()) == 1  # one line, never a traceback


@pytest.mark.parametrize("kind", sorted(FOREIGN))
def test_two_resumes_at_once_start_one_foreign_trainer(tmp_path, cli_env, kind):
    build, flags = FOREIGN[kind]
    run_dir = build(tmp_path)
    last = run_dir / "weights" / "last.pt"
    before = last.read_bytes() if last.exists() else None
    _one_winner(resume_twice_at_once(run_dir, cli_env, *flags))
    assert wait_for(lambda: _trainers(run_dir), timeout=60), read_status(run_dir)
    assert len(_trainers(run_dir)) == 1
    assert (last.read_bytes() if last.exists() else None) == before  # nobody rewrote the checkpoint
    if kind == "official":  # the winner's opt.yaml edit, once, with the first version kept
        assert yaml.safe_load((run_dir / "opt.yaml").read_text())["batch_size"] == 2
        assert yaml.safe_load((run_dir / "opt.yaml.orig").read_text())["batch_size"] == 4
    if kind == "ultralytics":
        command = yaml.safe_load((run_dir / "run.yaml").read_text())["command"]
        assert command.count("--yolotui-batch") == 1 and command[command.index("--yolotui-batch") + 1] == "2"
    (run_dir / "release").touch()
    assert wait_for(lambda: effective_state(run_dir) in ENDED, timeout=60), read_status(run_dir)
    assert len(_trainers(run_dir)) == 1 and len(read_status(run_dir).attempts) == 1


def test_two_resumes_at_once_start_one_engine_trainer(tmp_path, cli_env):
    run_dir = engine_run(tmp_path)
    starts_before = sum(e["type"] == "start" for e in read_events(run_dir / "events.jsonl"))
    _one_winner(resume_twice_at_once(run_dir, cli_env, "--epochs", "2"))
    assert wait_for(lambda: effective_state(run_dir) in ENDED, timeout=120), read_status(run_dir)
    status = read_status(run_dir)
    assert status.state == "finished" and len(status.attempts) == 1
    starts = sum(e["type"] == "start" for e in read_events(run_dir / "events.jsonl"))
    assert starts == starts_before + 1  # exactly one trainer ran
    manifest = yaml.safe_load((run_dir / "weights" / "last.pt.json").read_text())
    assert (manifest["epoch"], manifest["epochs"]) == (2, 2)


def _tamper(run_dir, planted):
    """Replace run.yaml's command, env and logging config by hand (its seal stays the old one)."""
    config = yaml.safe_load((run_dir / "run.yaml").read_text()) if (run_dir / "run.yaml").exists() else {}
    config.update(command=["/bin/sh", "-c", f"touch {planted}"], env={"PLANTED": str(planted)},
                  logging={"config": str(planted.with_suffix(".yaml"))})
    config.setdefault("name", run_dir.name)
    config.setdefault("backend", "yolotui")
    (run_dir / "run.yaml").write_text(yaml.safe_dump(config))


@pytest.mark.parametrize("kind", [*sorted(FOREIGN), "engine"])
def test_a_tampered_run_yaml_runs_nothing_without_trust(tmp_path, cli_env, kind):
    import subprocess
    import sys

    run_dir = engine_run(tmp_path) if kind == "engine" else FOREIGN[kind][0](tmp_path)
    planted = tmp_path / "PWNED"
    _tamper(run_dir, planted)
    proc = subprocess.run([sys.executable, "-m", "yolotui", "resume", str(run_dir),
                           *(["--epochs", "2"] if kind == "engine" else [])],
                          env=cli_env, cwd=tmp_path, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=120)
    assert proc.returncode != 0, proc.stdout
    line = proc.stderr.strip()
    assert len(line.splitlines()) == 1 and "--trust" in line and "run.yaml" in line
    assert ("logging" in line) if kind == "engine" else ("command" in line and "env" in line)
    assert not planted.exists() and not _trainers(run_dir)
    assert not (run_dir / "status.json").exists() or read_status(run_dir).attempts == []
    if kind == "exec":  # --trust runs the folder's own command: the user said so
        trusted = subprocess.run([sys.executable, "-m", "yolotui", "resume", str(run_dir), "--trust"], env=cli_env,
                                 cwd=tmp_path, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
        assert trusted.returncode == 0, trusted.stderr
        assert wait_for(planted.exists, timeout=60)


def _resume_on_a_terminal(run_dir, env, answer):
    """`yolotui resume RUN` with its stdin and stderr on a pseudo-terminal; `answer` typed at the question."""
    import os
    import pty
    import select
    import subprocess
    import sys

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "yolotui", "resume", str(run_dir)], env=env, cwd=run_dir.parent,
                            stdin=slave, stderr=slave, stdout=subprocess.PIPE, text=True)
    os.close(slave)
    shown = b""
    while b"[y/N]" not in shown:
        if not select.select([master], [], [], 60)[0]:  # nothing shown for a minute: give up, never hang
            break
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the terminal closed: it never asked
            break
        if not chunk:
            break
        shown += chunk
    os.write(master, answer.encode() + b"\n")
    try:
        proc.communicate(timeout=120)
    finally:
        proc.kill()
    os.close(master)
    return proc.returncode, shown.decode(errors="replace")


def test_on_a_terminal_the_folder_s_command_is_shown_and_runs_only_after_a_y(tmp_path, cli_env):
    run_dir = exec_run(tmp_path)
    planted = tmp_path / "PWNED"
    _tamper(run_dir, planted)
    code, shown = _resume_on_a_terminal(run_dir, cli_env, "n")
    assert code != 0 and "/bin/sh -c touch" in shown and "PLANTED" in shown and not planted.exists()
    code, shown = _resume_on_a_terminal(run_dir, cli_env, "y")
    assert code == 0, shown
    assert wait_for(planted.exists, timeout=60)
