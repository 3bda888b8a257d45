"""Hostile or broken files and failure classes: bounded time and memory, a clear line, no crash.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from runs_helpers import reap_runs, wait_for  # noqa: F401  (reap_runs is an autouse fixture)

from yolotui.errors import UserError
from yolotui.placement.launcher import launch
from yolotui.runs.status import effective_state, read_status
from yolotui.runs.store import create_run_dir

PY = sys.executable
REPO = Path(__file__).resolve().parent.parent


def _cli(args: list[str], timeout: float = 60, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), **kwargs.pop("env", {})}
    return subprocess.run([PY, "-m", "yolotui", *args], capture_output=True, text=True, env=env, timeout=timeout,
                          **kwargs)


def _one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


# ---------------------------------------------------------------------------------------------- typed status.json fields

def _finished_run(tmp_path: Path) -> Path:
    run_dir = create_run_dir(tmp_path / "proj", "exp")
    launch(run_dir, ["true"], name="exp")
    wait_for(lambda: effective_state(run_dir) == "finished", timeout=15)
    return run_dir


def test_a_wrongly_typed_status_field_is_reported_and_the_rest_still_works(tmp_path):
    from yolotui.runs.status import read_status_checked
    from yolotui.runs.summary import summarize, summarize_all

    run_dir = _finished_run(tmp_path)
    other = create_run_dir(tmp_path / "proj", "fine")
    launch(other, ["true"], name="fine")
    wait_for(lambda: effective_state(other) == "finished", timeout=15)
    data = json.loads((run_dir / "status.json").read_text())
    data["started"] = "2026-12-02"
    (run_dir / "status.json").write_text(json.dumps(data))

    status, problem = read_status_checked(run_dir)
    assert status is None and problem == "unreadable: status.json: started: expected a number"
    summary = summarize(run_dir)
    assert summary.message == "unreadable: status.json: started: expected a number" and summary.started is None
    assert {s.name for s in summarize_all(use_cache=False)} >= {"exp", "fine"}
    listed = _cli(["ls"])
    assert listed.returncode == 0 and "fine" in listed.stdout and "exp" in listed.stdout, listed.stderr
    as_json = _cli(["ls", "--json"])
    assert as_json.returncode == 0 and "unreadable: status.json: started: expected a number" in as_json.stdout


@pytest.mark.parametrize("field,value,expected", [
    ("attempt", "two", "attempt: expected a whole number"),
    ("command", "rm -rf /", "command: expected a list of text"),
    ("attempts", [1, 2], "attempts: expected a list of objects"),
    ("updated", float("nan"), "updated: expected a number"),
    ("launching", "yes", "launching: expected true or false"),
    ("earlier_seconds", "1 h", "earlier_seconds: expected a number"),
    ("notifications", [1], "notifications: expected an object"),
    ("slurm", "123", "slurm: expected an object"),
])
def test_every_status_field_is_type_checked(tmp_path, field, value, expected):
    from yolotui.runs.status_schema import status_problem

    assert status_problem({"state": "running", field: value}) == expected
    assert status_problem({"state": "running", "started": 1.0, "attempts": [{}]}) is None


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_tui_home_shows_a_run_with_a_broken_status_and_does_not_crash(tmp_path):
    from tui_fakes import FakeSampler, wait_until

    from yolotui.tui.app import YolotuiApp
    from yolotui.tui.screens.dashboard import DashboardScreen

    run_dir = _finished_run(tmp_path)
    data = json.loads((run_dir / "status.json").read_text())
    data["started"] = "2026-12-02"
    (run_dir / "status.json").write_text(json.dumps(data))
    app = YolotuiApp(sampler=FakeSampler(), gpu_interval=None, remember_theme=False)
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_until(pilot, lambda: app.home.loaded)
        table = app.home.query_one("#runs")
        names = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert "exp" in names
        table.focus()
        await pilot.press("enter")  # the run's dashboard opens too, without its status
        assert await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen))
        await pilot.pause()
        assert app.is_running and app.screen.run_dir == run_dir


# ---------------------------------------------------------------------------------------------- zip-bomb checkpoints

def _zip_bomb(path: Path, inflated_mb: int = 300, member: str = "archive/data/0") -> None:
    """A torch-looking zip whose one storage deflates from a few hundred KB to `inflated_mb` MB of zeros."""
    import pickle

    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(zipfile.ZipInfo("archive/data.pkl"), pickle.dumps({"epoch": 1}, protocol=2))
        info = zipfile.ZipInfo(member)
        info.compress_type = zipfile.ZIP_DEFLATED
        with archive.open(info, "w", force_zip64=True) as handle:
            block = b"\0" * (1 << 20)
            for _ in range(inflated_mb):
                handle.write(block)


def test_a_zip_bomb_checkpoint_is_corrupt_within_2_s_and_200_mb(tmp_path):
    bomb = tmp_path / "weights" / "last.pt"
    bomb.parent.mkdir()
    _zip_bomb(bomb)
    assert bomb.stat().st_size < 3_000_000
    # Peak memory as VmHWM of the child's own address space (ru_maxrss would include the forked pytest's).
    code = ("import json, sys, time\n"
            "from yolotui.health.verdict import diagnose_checkpoint\n"
            "t = time.perf_counter(); v = diagnose_checkpoint(sys.argv[1])\n"
            "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]\n"
            "print(json.dumps({'s': time.perf_counter() - t, 'verdict': v.verdict, "
            "'rss_mb': int(hwm) / 1024, 'reasons': v.reasons}))\n")
    proc = subprocess.run([PY, "-c", code, str(bomb)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["verdict"] == "corrupt", result
    assert result["s"] < 2.0 and result["rss_mb"] < 200, result
    assert any("suspicious" in reason or "inflate" in reason for reason in result["reasons"]), result


def test_a_compressed_pickle_bomb_is_not_inflated(tmp_path):
    from yolotui.health.container import ContainerError, read_container

    bomb = tmp_path / "bomb.pt"
    _zip_bomb(bomb, inflated_mb=100, member="archive/data.pkl.x")
    with zipfile.ZipFile(tmp_path / "pkl.pt", "w") as archive:
        info = zipfile.ZipInfo("archive/data.pkl")
        info.compress_type = zipfile.ZIP_DEFLATED
        with archive.open(info, "w", force_zip64=True) as handle:
            for _ in range(100):
                handle.write(b"\0" * (1 << 20))
    for path in (bomb, tmp_path / "pkl.pt"):
        with pytest.raises(ContainerError, match="suspicious ratio"):
            read_container(path)


# ---------------------------------------------------------------------------------------------- YAML bombs

LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 10) + "]\n" for i in range(8)) + \
    "train: images/train\nval: images/val\nnames: *i\n"


def test_billion_laughs_is_refused_everywhere_yolotui_reads_yaml(tmp_path):
    from yolotui import safe_yaml
    from yolotui.config import load_yaml
    from yolotui.datasets.config import load_data_yaml
    from yolotui.runs.runconfig import read_run_config

    bomb = tmp_path / "data.yaml"
    bomb.write_text(LAUGHS)
    started = time.monotonic()
    with pytest.raises(UserError, match="aliases"):
        safe_yaml.load_file(bomb)
    with pytest.raises(UserError, match="aliases"):
        load_yaml(bomb, "hyp")
    with pytest.raises(UserError, match="aliases"):
        load_data_yaml(bomb)
    (tmp_path / "run.yaml").write_text(LAUGHS)
    with pytest.raises(UserError, match="aliases"):
        read_run_config(tmp_path)
    assert time.monotonic() - started < 5
    proc = _cli(["check-data", str(bomb)])
    line = _one_line_error(proc)
    assert "data.yaml" in line and "aliases" in line


def test_settings_and_log_config_yaml_are_bounded_too(tmp_path):
    from yolotui.logconfig import load
    from yolotui.usersettings import read_yaml_mapping

    bomb = tmp_path / "logging.yaml"
    bomb.write_text(LAUGHS)
    started = time.monotonic()
    with pytest.raises(UserError, match="aliases"):
        read_yaml_mapping(bomb, "settings")
    with pytest.raises(UserError, match=r"--log-config .*logging\.yaml: .*aliases"):
        load(bomb)
    assert time.monotonic() - started < 5
    bomb.write_bytes(b"version: 1\nroot: \xff\n")
    with pytest.raises(UserError, match="not UTF-8"):
        read_yaml_mapping(bomb, "settings")


def test_yaml_size_nesting_and_recursive_aliases_are_bounded(tmp_path):
    from yolotui import safe_yaml

    with pytest.raises(safe_yaml.YamlLimitError, match="larger than"):
        safe_yaml.load_text("a: " + "x" * (safe_yaml.MAX_BYTES + 1), "big.yaml")
    with pytest.raises(safe_yaml.YamlLimitError, match="nested too deeply"):
        safe_yaml.load_text("[" * 50_000 + "]" * 50_000, "deep.yaml")
    with pytest.raises(safe_yaml.YamlLimitError, match="refers to itself"):
        safe_yaml.load_text("a: &a [1, *a]\n", "loop.yaml")
    # Ordinary anchors and merge keys still work.
    assert safe_yaml.load_text("base: &b {x: 1}\nother: {<<: *b, y: 2}\n")["other"] == {"x": 1, "y": 2}


def test_one_shared_yaml_loader_is_used_everywhere():
    offenders = []
    for path in (REPO / "yolotui").rglob("*.py"):
        if path.name == "safe_yaml.py":
            continue
        text = path.read_text(encoding="utf-8")
        if re.search(r"yaml\.(safe_load|load|full_load|unsafe_load|load_all|safe_load_all)\(", text):
            offenders.append(str(path.relative_to(REPO)))
    assert offenders == []


def test_wizard_model_check_refuses_a_yaml_bomb(tmp_path):
    from yolotui.tui.wizard_checks import check_model_path

    bomb = tmp_path / "model.yaml"
    bomb.write_text(LAUGHS.replace("names: *i", "backbone: *i\nhead: *i"))
    with pytest.raises(UserError, match="aliases"):
        check_model_path(str(bomb))


# --------------------------------------------------------------------------------------------- resume --interrupted

def test_resume_interrupted_rebuilds_the_command_from_run_yaml(tmp_path):
    from yolotui.placement.service import relaunch_plan, resume_interrupted

    run_dir = create_run_dir(tmp_path / "proj", "exp")
    launch(run_dir, ["sleep", "100"], name="exp")
    wait_for(lambda: (read_status(run_dir) or None) and read_status(run_dir).trainer_pid, timeout=15)
    os.kill(read_status(run_dir).supervisor_pid, signal.SIGKILL)  # sleep gets SIGTERM and ends with it
    wait_for(lambda: effective_state(run_dir) == "interrupted", timeout=15)
    pwned = tmp_path / "pwned"
    data = json.loads((run_dir / "status.json").read_text())
    data["attempts"][-1]["command"] = ["sh", "-c", f"touch {pwned}; sleep 100"]
    data["remedies"] = [{"attempt": 2, "changes": {
        "args": {"--batch-size": 4, "--evil": "x; rm -rf ~", "--lr-scale": "1; touch /tmp/x"},
        "env": {"LD_PRELOAD": "/tmp/evil.so", "NCCL_BLOCKING_WAIT": "1"}}}]
    (run_dir / "status.json").write_text(json.dumps(data))
    plan = relaunch_plan(run_dir)
    assert plan["command"] == ["sleep", "100", "--batch-size", "4"]
    assert "LD_PRELOAD" not in plan["env"] and plan["env"]["NCCL_BLOCKING_WAIT"] == "1"
    # A plain command without remedies resumes exactly as run.yaml says.
    data["remedies"] = []
    (run_dir / "status.json").write_text(json.dumps(data))
    results = resume_interrupted()
    assert [r.resumed for r in results] == [True]
    wait_for(lambda: read_status(run_dir).trainer_pid, timeout=15)
    assert read_status(run_dir).command == ["sleep", "100"]
    time.sleep(0.3)
    assert not pwned.exists()


def test_resume_interrupted_never_runs_a_run_yaml_yolotui_did_not_write(tmp_path):
    import yaml

    from yolotui.placement.service import resume_interrupted

    run_dir = create_run_dir(tmp_path / "proj", "exp")
    launch(run_dir, ["sleep", "100"], name="exp")
    wait_for(lambda: (read_status(run_dir) or None) and read_status(run_dir).trainer_pid, timeout=15)
    os.kill(read_status(run_dir).supervisor_pid, signal.SIGKILL)
    wait_for(lambda: effective_state(run_dir) == "interrupted", timeout=15)
    pwned = tmp_path / "pwned"
    config = yaml.safe_load((run_dir / "run.yaml").read_text())
    config["command"] = ["sh", "-c", f"touch {pwned}"]  # copied in or edited: the seal no longer matches
    (run_dir / "run.yaml").write_text(yaml.safe_dump(config))
    results = resume_interrupted()
    assert [r.resumed for r in results] == [False]
    assert "not written by yolotui on this machine" in results[0].message and "--trust" in results[0].message
    assert effective_state(run_dir) == "interrupted" and not pwned.exists()


# --------------------------------------------------------------------------------------------- CPU allocation failures

def test_a_cpu_allocation_failure_is_not_oom():
    import torch

    from yolotui.engine.train.failures import classify_exception
    from yolotui.failure_text import classify_text

    try:
        torch.empty(1 << 50, dtype=torch.uint8)  # 1 PiB on the CPU: the allocator refuses at once
    except (RuntimeError, MemoryError) as exc:
        real = exc
    else:  # pragma: no cover - a machine with a petabyte
        pytest.fail("the allocation did not fail")
    assert classify_exception(real) != "oom"
    cpu_oom = torch.OutOfMemoryError("DefaultCPUAllocator: not enough memory: you tried to allocate 4 GB")
    assert classify_exception(cpu_oom) != "oom"
    assert classify_exception(MemoryError()) != "oom"
    assert classify_text(f"Traceback ...\n{type(real).__name__}: {real}\n") is None
    assert classify_text("torch.OutOfMemoryError: DefaultCPUAllocator: can't allocate memory") is None
    # CUDA and cuDNN memory errors still are.
    assert classify_exception(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB")) == "oom"
    assert classify_text("RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED") == "oom"
    assert classify_text("RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR") == "oom"
    # The official trainer's shim (standard library only) draws the same line, and knows a full disk.
    from yolotui.backends.official import shim

    assert shim.classify(cpu_oom, f"torch.OutOfMemoryError: {cpu_oom}") == "crash"
    cuda_oom = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB")
    assert shim.classify(cuda_oom, f"torch.OutOfMemoryError: {cuda_oom}") == "oom"
    assert shim.classify(OSError(28, "No space left on device"), "OSError: [Errno 28] No space left on device") \
        == "disk"


# --------------------------------------------------------------------------------------- one-line errors (TUI)

@pytest.mark.anyio
@pytest.mark.parametrize("content", [b"theme: [1, 2]\n", b"theme: \xff\xfe yolo\n", b"theme: [unclosed\n"])
async def test_a_broken_settings_yaml_starts_the_tui_with_defaults_and_says_so(content):
    from tui_fakes import FakeSampler, wait_until

    from yolotui.tui import themes
    from yolotui.tui.app import YolotuiApp

    path = themes.settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    app = YolotuiApp(sampler=FakeSampler(), gpu_interval=None, remember_theme=False)
    async with app.run_test(size=(100, 30)) as pilot:
        assert await wait_until(pilot, lambda: app.home.loaded)
        assert app.theme == themes.DEFAULT_THEME
        assert any(str(path) in problem for problem in app.theme_problems)
