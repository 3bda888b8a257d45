"""Units of the official backend: log cleaning, the trainer-environment check, command recognition, the
shim's load allow-list and results/event pruning, the 'N epochs completed' rule. No subprocess trainer here."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from yolotui.backends import get_backend
from yolotui.backends.base import CommandRequest
from yolotui.backends.official import backend as official
from yolotui.backends.official import shim, shim_report
from yolotui.backends.official.environment import official_env_issues, probe_interpreter
from yolotui.logtext import LogCleaner, clean_text
from yolotui.supervisor import policy

STANDIN = Path(__file__).resolve().parent / "official_standin"

TRACE = """Exception in thread Thread-{n} (plot_images):
Traceback (most recent call last):
  File "/repo/utils/plots.py", line 86, in box_label
    w, h = self.font.getsize(label)
AttributeError: 'FreeTypeFont' object has no attribute 'getsize'"""


def test_progress_lines_show_their_final_state_and_repeated_tracebacks_collapse():
    text = ("start\n  0%|  | 0/2 00:00\r 50%|# | 1/2 00:01\r100%|##| 2/2 00:02\n"
            + TRACE.format(n=3) + "\nbetween\n" + TRACE.format(n=4) + "\n" + TRACE.format(n=5) + "\nend\n")
    lines = clean_text(text)
    assert lines[0] == "start"
    assert lines[1] == "100%|##| 2/2 00:02"  # not the 0% and 50% redraws
    assert lines.count("AttributeError: 'FreeTypeFont' object has no attribute 'getsize'") == 1
    collapsed = [line for line in lines if line.startswith("[yolotui: the same traceback again")]
    assert len(collapsed) == 2 and "(3 times so far)" in collapsed[-1]
    assert "between" in lines and lines[-2:] == ["end", ""]


def test_the_cleaner_keeps_state_between_feeds():
    cleaner = LogCleaner()
    first = cleaner.feed(TRACE.format(n=1).split("\n"))
    second = cleaner.feed(TRACE.format(n=2).split("\n")[:3]) + cleaner.feed(TRACE.format(n=2).split("\n")[3:])
    assert len(first) == 5 and len(second) == 1 and "again" in second[0]


def test_environment_issues_name_what_breaks_the_official_code():
    issues = official_env_issues({"executable": "/img/python", "torch": "2.6.0", "numpy": "2.4.1",
                                  "pillow": "10.2.0"})
    text = " ".join(f"{i.level}:{i.message}" for i in issues)
    assert "warning:numpy 2.4.1" in text and "np.trapz" in text
    assert "warning:Pillow 10.2.0" in text and "getsize" in text
    assert "note:torch 2.6.0" in text and "weights_only" in text
    assert official_env_issues({"torch": "1.11.0", "numpy": "1.23.5", "pillow": "9.5.0"}) == []
    assert "cannot run" in official_env_issues(probe_interpreter("/nonexistent/python"))[0].message


def test_probe_of_this_interpreter_reads_versions_without_importing():
    facts = probe_interpreter(sys.executable)
    assert facts["python"] == sys.version.split()[0] and facts["torch"]


def test_exec_commands_are_recognised(tmp_path):
    script = STANDIN / "train_dual.py"
    found = official.recognise_command(["python3", "-u", str(script), "--epochs", "3"])
    assert found is not None and found.repo == STANDIN and found.args == ["--epochs", "3"]
    assert official.recognise_command([sys.executable, str(STANDIN / "train.py")]).script == "train.py"
    assert official.recognise_command([str(STANDIN / "train_triple.py")]).script == "train_triple.py"
    (tmp_path / "train_dual.py").write_text("print(1)\n")  # not an official checkout: stays a plain exec
    assert official.recognise_command(["python", str(tmp_path / "train_dual.py")]) is None
    assert official.recognise_command(["python", "other.py"]) is None


def test_output_flags_are_taken_out_and_the_backend_says_what_it_cannot_do(tmp_path):
    project, name, exist_ok, rest = official.output_folder(["--epochs", "3", "--project=p", "--name", "n",
                                                            "--exist-ok"], tmp_path)
    assert (project, name, exist_ok, rest) == (tmp_path / "p", "n", True, ["--epochs", "3"])
    backend = get_backend("official")
    assert backend.supports("resume") and backend.supports("extend")
    assert not backend.supports("save_now") and not backend.supports("mid_epoch_stop")
    assert not backend.supports("lr_scale")


def test_completed_line_makes_a_failed_exit_finished():
    tail = "2 epochs completed in 0.073 hours.\nTraceback (most recent call last):\n  File x\nUnpicklingError: no\n"
    decision = policy.decide({"attempt": 1, "exit_code": 1, "exit_signal": None, "log_tail": tail},
                             {"restart": {"max_attempts": 3}}, [])
    assert decision.state == "finished" and not decision.retry and "2 epochs completed" in decision.message
    crash = policy.decide({"attempt": 1, "exit_code": 1, "exit_signal": None, "log_tail": "Traceback\nboom\n"},
                          {"restart": {"max_attempts": 3}}, [])
    assert crash.retry


def test_shim_allow_list_admits_official_classes_and_refuses_others():
    sys.path.insert(0, str(STANDIN))
    try:
        assert shim.allowed_global("models.yolo.DetectionModel", str(STANDIN)) is not None
        assert shim.allowed_global("torch.nn.modules.linear.Linear", str(STANDIN)) is not None
        assert shim.allowed_global("torch.load", str(STANDIN)) is None  # a function, not a module class
        assert shim.allowed_global("os.system", str(STANDIN)) is None
        assert shim.allowed_global("builtins.eval", str(STANDIN)) is None
        assert shim.allowed_global("models.yolo.torch", str(STANDIN)) is None  # not a class defined there
    finally:
        sys.path.remove(str(STANDIN))
        for name in [m for m in sys.modules if m == "models" or m.startswith("models.")]:
            del sys.modules[name]


@pytest.mark.parametrize("start", [0, 2])
def test_shim_drops_rows_and_events_of_the_restarted_epoch_on(tmp_path, start):
    csv = tmp_path / "results.csv"
    csv.write_text("epoch,x\n0,1\n1,2\n2,3\n3,4")  # a torn last row too
    assert shim_report.drop_results_from(str(csv), start) == 4 - start
    assert [line.split(",")[0] for line in csv.read_text().splitlines()[1:]] == [str(e) for e in range(start)]
    events = tmp_path / "events.jsonl"
    rows = [{"type": "start"}, {"type": "epoch", "epoch": 0}, {"type": "checkpoint", "epoch": 1},
            {"type": "batch", "epoch": 2}, {"type": "epoch", "epoch": 2}, {"type": "checkpoint", "epoch": 3},
            {"type": "done"}]
    events.write_text("".join(json.dumps(r) + "\n" for r in rows))
    shim_report.drop_events_from(str(events), start)
    kept = [json.loads(line) for line in events.read_text().splitlines()]
    assert {"type": "done"} not in kept and kept[0] == {"type": "start"}
    assert all(e.get("epoch", 0) < start or e["type"] == "checkpoint" and e["epoch"] <= start for e in kept[1:])


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_dashboard_shows_epochs_and_charts_of_an_official_run(tmp_path, cli_env, anyio_backend):
    """A stand-in official run through the CLI and supervisor, then the dashboard (Pilot) on it."""
    import subprocess

    from tui_fakes import FakeSampler, rendered, wait_until

    from tests.runs_helpers import wait_for
    from yolotui.runs.status import effective_state
    from yolotui.tui.app import YolotuiApp
    from yolotui.tui.screens.dashboard import DashboardScreen
    from yolotui.tui.widgets.chart import BrailleChart

    run_dir = tmp_path / "runs" / "off"
    subprocess.run([sys.executable, "-m", "yolotui", "train", "--backend", "official", "--repo", str(STANDIN),
                    "--python", sys.executable, "--epochs", "3", "--project", str(run_dir.parent), "--name", "off"],
                   env=cli_env, cwd=tmp_path, check=True, capture_output=True, timeout=120)
    wait_for(lambda: effective_state(run_dir) in ("finished", "failed"), timeout=60)
    assert effective_state(run_dir) == "finished"
    app = YolotuiApp(run_dir=run_dir, sampler=FakeSampler(), gpu_interval=None)
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.settled)
        await pilot.pause()
        screen = app.screen
        assert " 3/3 " in rendered(screen.query_one("#progress"))
        loss = screen.query_one("#loss-chart", BrailleChart)
        assert [s.label for s in loss.series] == ["box", "cls", "dfl"] and len(loss.series[0].values) == 3
        metric_text = rendered(screen.query_one("#metric-chart"))
        assert any(chr(0x2801) <= ch <= chr(0x28FF) for ch in metric_text), "braille dots drawn"
        log_lines = [str(line) for line in screen.query_one("#log").lines]
        assert any("3 epochs completed" in line for line in log_lines)
        assert not any("1/4 #" in line for line in log_lines)  # progress redraws: only each line's final state


def test_interrupted_official_run_resumes_only_from_a_usable_last_pt(tmp_path):
    """`resume --interrupted` relaunches with resume_first: --resume only when the run's backend says so."""
    spec = get_backend("official").new_run_command(CommandRequest(
        run_dir=tmp_path / "run", opt={"python": "python", "repo": str(STANDIN), "script": "train_dual.py"},
        argv=("--epochs", "3")))
    config = {"command": spec.command, **spec.extra, "resume_first": True, "backend": "official"}
    assert "--resume" not in policy.command_for_attempt(config, 1, {})  # no last.pt: the original command
    (tmp_path / "run" / "weights").mkdir(parents=True)
    (tmp_path / "run" / "weights" / "last.pt").write_bytes(b"torn")
    assert "--resume" not in policy.command_for_attempt(config, 2, {})  # damaged: the original command
    assert policy.command_for_attempt({**config, "backend": "no-such"}, 2, {})[-2:] != ["--resume"]  # unknown: no
    assert policy.command_for_attempt({**config, "backend": "exec"}, 2, {})[-2] == "--resume"  # no check of its own


def test_doctor_follows_an_older_exec_run_to_the_official_folder(tmp_path):
    """A `yolotui exec -- python train_dual.py` run from before the official backend: its folder is logged."""
    import yaml

    from yolotui.backends.official.diagnosis import official_run

    run_dir = tmp_path / "runs" / "exec" / "exp"
    run_dir.mkdir(parents=True)
    (run_dir / "run.yaml").write_text(yaml.safe_dump({"backend": "exec", "cwd": str(tmp_path / "yolov9"),
                                                      "command": ["python", "train_dual.py", "--epochs", "3"]}))
    (run_dir / "train.log").write_text("x\nLogging results to \x1b[1mruns/train/exp3\x1b[0m\nStarting training\n")
    facts = official_run(run_dir, probe=False)
    assert facts is not None and facts.folder == tmp_path / "yolov9" / "runs" / "train" / "exp3"
    assert facts.python == "python"
    (run_dir / "run.yaml").write_text(yaml.safe_dump({"backend": "exec", "command": ["sleep", "1"]}))
    assert official_run(run_dir, probe=False) is None


def test_shim_classifies_configuration_errors_as_data():
    text = "Traceback (most recent call last):\n  File x\nAssertionError: File not found: yolo.yaml\n"
    assert shim.classify(AssertionError("File not found: yolo.yaml"), text) == "data"
    assert shim.classify(RuntimeError("CUDA out of memory. Tried"), "RuntimeError: CUDA out of memory.") == "oom"
    assert shim.classify(RuntimeError("boom"), "RuntimeError: boom") == "crash"
