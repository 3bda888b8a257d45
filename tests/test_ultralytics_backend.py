"""The ultralytics backend against the real ultralytics package (AGPL-3.0: only ever run as a separate process).

CPU, YOLO_OFFLINE=1, a settings folder of its own (YOLO_CONFIG_DIR, every integration off), ultralytics'
yolov9t.yaml at 64 px on 8 generated images, 2-3 epochs, workers 0, plots and AMP off. End to end through the
CLI and the detached supervisor: a `yolotui train --backend ultralytics` run (shared by the first tests) shows
epoch/total in `status --json` and gets checkpoint verdicts; it is extended to 3 epochs; `yolotui exec -- yolo
detect train` is recognised, SIGKILLed after a checkpoint and resumed the ultralytics way with exactly one row per
epoch; an OOM injected through the shim halves the batch for the resumed attempt.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.runs_helpers import kill_run, wait_for
from yolotui.health.verdict import CORRUPT, FINISHED, RESUMABLE, diagnose_checkpoint
from yolotui.runs.results import read_rows
from yolotui.runs.status import effective_state, read_status

ENDED = ("finished", "failed", "stopped")
YOLO = Path(sys.executable).with_name("yolo")  # the ultralytics console script beside this interpreter
SMALL = ["imgsz=64", "batch=4", "workers=0", "plots=False", "amp=False", "device=cpu"]
INTEGRATIONS = ("clearml", "comet", "dvc", "mlflow", "raytune", "tensorboard", "wandb", "sync")


def yolotui(args, env, cwd, check=True):
    proc = subprocess.run([sys.executable, "-m", "yolotui", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=180)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def ended(run_dir: Path) -> str | None:
    state = effective_state(run_dir)
    return state if state in ENDED else None


def events(run_dir: Path) -> list[dict]:
    from runs_helpers import run_events

    return run_events(run_dir)


def epochs_of(run_dir: Path) -> list[int]:
    return [int(r["epoch"]) for r in read_rows(run_dir / "results.csv")]


def why(run_dir: Path) -> str:
    log = run_dir / "train.log"
    return f"{read_status(run_dir)}\n{log.read_text()[-3000:] if log.exists() else ''}"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A data set, an isolated ultralytics settings folder and the CLI's environment, once for the module."""
    from yolotui.datasets.demo import make_demo_dataset

    root = tmp_path_factory.mktemp("ultra")
    data = make_demo_dataset(root / "data", n_train=8, n_val=4, img=64)
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}  # ultralytics as users run it
    repo = str(Path(__file__).resolve().parent.parent)
    env.update(PYTHONPATH=repo + os.pathsep + env.get("PYTHONPATH", ""), PYTHONUNBUFFERED="1", YOLO_OFFLINE="1",
               YOLO_CONFIG_DIR=str(root / "ultralytics-settings"), YOLOTUI_HOME=str(root / "home"),
               YOLO_VERBOSE="True", MPLCONFIGDIR=str(root / "matplotlib"))  # nothing written under ~
    settings = ", ".join(f"{k!r}: False" for k in INTEGRATIONS)
    subprocess.run([sys.executable, "-c", f"from ultralytics.utils import SETTINGS; SETTINGS.update({{{settings}}})"],
                   env=env, check=True, capture_output=True, timeout=120)
    yield {"root": root, "data": data, "env": env}
    for status in root.rglob("status.json"):
        kill_run(status.parent)


@pytest.fixture(scope="module")
def finished_run(world):
    """`yolotui train --backend ultralytics`, 2 epochs, run to its end."""
    run_dir = world["root"] / "runs" / "fit"
    proc = yolotui(["train", "--backend", "ultralytics", "--model", "yolov9t.yaml", "--data", str(world["data"]),
                    "--epochs", "2", "--imgsz", "64", "--batch", "4", "--workers", "0", "--device", "cpu",
                    "--project", str(run_dir.parent), "--name", "fit", "plots=False", "amp=False"],
                   world["env"], world["root"])
    assert "ultralytics is AGPL-3.0" in proc.stdout
    assert wait_for(lambda: ended(run_dir), timeout=150) == "finished", why(run_dir)
    return run_dir


def test_a_train_backend_run_reports_epoch_of_total_and_records_its_save_dir(world, finished_run):
    run_dir = finished_run
    status = json.loads(yolotui(["status", str(run_dir), "--json"], world["env"], world["root"]).stdout)
    assert status["backend"] == "ultralytics" and status["state"] == "finished"
    assert (status["summary"]["epoch"], status["summary"]["epochs"]) == (2, 2)
    assert epochs_of(run_dir) == [0, 1]  # ultralytics' header, read under the official names
    run_yaml = yaml.safe_load((run_dir / "run.yaml").read_text())
    assert run_yaml["backend"] == "ultralytics" and run_yaml["ultralytics"]["save_dir"] == str(run_dir)
    assert run_yaml["resume_args"] == ["--yolotui-resume", str(run_dir / "weights" / "last.pt")]
    evs = events(run_dir)
    start = next(e for e in evs if e["type"] == "start")
    assert start["backend"] == "ultralytics" and start["epochs"] == 2 and start["batches"] == 2
    assert [e["epoch"] for e in evs if e["type"] == "epoch"] == [0, 1]  # not the final validation's repeat
    batches = [e for e in evs if e["type"] == "batch"]
    assert batches and set(batches[-1]["losses"]) == {"box", "cls", "dfl"} and batches[-1]["epochs"] == 2
    saves = [e for e in evs if e["type"] == "checkpoint" and e["path"].endswith("last.pt")]
    assert [e["epoch"] for e in saves] == [1, 2] and all(len(e["sha256"]) == 64 for e in saves)
    done = [e for e in evs if e["type"] == "done"]
    assert done and done[-1]["completed"] == "2 epochs completed"
    log = (run_dir / "train.log").read_text()
    assert "every checkpoint is scanned before it is unpickled" in log
    from yolotui.tui.runview import RunReader  # the dashboard's reader: the same view as an engine run's

    view = RunReader(run_dir).refresh()
    assert (view.epochs, view.finished_epochs, view.done) == (2, 2, True)
    assert [p.epoch for p in view.points] == [0, 1] and view.points[-1].box is not None
    assert view.overall_fraction() == 1.0
    assert [(c.name, c.verdict, c.epoch) for c in view.checkpoints] == [("last.pt", FINISHED, 2),
                                                                        ("best.pt", FINISHED, 2)]
    listed = yolotui(["ls"], world["env"], world["root"]).stdout
    assert any(line.split()[:3] == ["fit", "finished", "2/2"] for line in listed.splitlines())


def test_doctor_verdicts_on_real_ultralytics_checkpoints(world, finished_run):
    weights = finished_run / "weights"
    last = diagnose_checkpoint(weights / "last.pt")
    assert last.verdict == FINISHED and last.kind == "ultralytics" and last.epoch == 2 and last.total_epochs == 2
    assert last.info.epoch == -1 and not last.info.has_optimizer  # stripped by ultralytics at the end
    assert any("stripped by ultralytics" in r and "fine-tune" in r for r in last.reasons)
    assert any("on the allow-list" in r for r in last.reasons)
    kept = diagnose_checkpoint(weights / "last.unstripped.pt")  # the shim's link, taken before the strip
    assert kept.verdict == FINISHED and kept.info.has_optimizer and kept.info.epoch == 1
    assert kept.info.versions["ultralytics"] and kept.info.date
    torn = world["root"] / "torn.pt"
    data = (weights / "last.unstripped.pt").read_bytes()
    torn.write_bytes(data[: len(data) // 2])
    assert diagnose_checkpoint(torn, find_fallback=False).verdict == CORRUPT
    report = json.loads(yolotui(["doctor", str(finished_run), "--json"], world["env"], world["root"]).stdout)
    assert report["last"]["verdict"] == FINISHED and report["drift"] == []
    assert f"yolotui resume {finished_run.name} --epochs N" in report["advice"]


def test_a_finished_run_extends_to_three_epochs_from_its_unstripped_last_pt(world, finished_run):
    run_dir = finished_run
    proc = yolotui(["resume", str(run_dir), "--epochs", "3"], world["env"], world["root"])
    assert "train_args epochs 2 -> 3" in proc.stdout and "last.pt.orig" in proc.stdout
    assert wait_for(lambda: ended(run_dir), timeout=150) == "finished", why(run_dir)
    assert epochs_of(run_dir) == [0, 1, 2]
    assert "Resuming training" in (run_dir / "train.log").read_text()
    assert read_status(run_dir).attempts[-1]["command"][-2:] == ["--yolotui-resume", str(run_dir / "weights" / "last.pt")]
    assert diagnose_checkpoint(run_dir / "weights" / "last.pt").epoch == 3
    # with no unstripped copy left, a stripped last.pt is offered as a fine-tune, with the reason
    (run_dir / "weights" / "last.unstripped.pt").unlink()
    refused = yolotui(["resume", str(run_dir), "--epochs", "4"], world["env"], world["root"], check=False)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "stripped" in refused.stderr and "yolotui finetune --from" in refused.stderr


def test_exec_yolo_train_is_recognised_then_a_sigkill_resumes_the_ultralytics_way(world):
    run_dir = world["root"] / "runs" / "killed"
    env = {**world["env"], "YOLOTUI_STEP_DELAY_S": "1.5"}  # the first attempt only: time to kill it mid-run
    proc = yolotui(["exec", "--project", str(run_dir.parent), "--name", "killed", "--", str(YOLO), "detect",
                    "train", "model=yolov9t.yaml", f"data={world['data']}", "epochs=3", *SMALL], env, world["root"])
    assert "recognised an ultralytics training" in proc.stderr
    assert yaml.safe_load((run_dir / "run.yaml").read_text())["backend"] == "ultralytics"
    wait_for(lambda: any(e["type"] == "checkpoint" for e in events(run_dir)), timeout=120)
    os.kill(read_status(run_dir).trainer_pid, signal.SIGKILL)  # at once: ultralytics is mid-epoch
    assert wait_for(lambda: ended(run_dir), timeout=60) == "failed"
    assert read_status(run_dir).failure_class == "killed"
    done = max(e["epoch"] for e in events(run_dir) if e["type"] == "checkpoint")  # 1, or 2 on a slow machine
    assert done in (1, 2)
    status = json.loads(yolotui(["status", str(run_dir), "--json"], world["env"], world["root"]).stdout)
    assert status["summary"]["epochs"] == 3 and status["summary"]["epoch"] == done
    interrupted = diagnose_checkpoint(run_dir / "weights" / "last.pt")
    assert interrupted.verdict == RESUMABLE and interrupted.epoch == done and interrupted.info.has_optimizer
    proc = yolotui(["resume", str(run_dir)], world["env"], world["root"])
    assert "ultralytics' resume=True" in proc.stdout
    assert wait_for(lambda: ended(run_dir), timeout=150) == "finished", why(run_dir)
    assert epochs_of(run_dir) == [0, 1, 2]  # exactly one row per epoch
    assert "Resuming training" in (run_dir / "train.log").read_text()
    assert read_status(run_dir).attempts[-1]["command"][-2:] == ["--yolotui-resume", str(run_dir / "weights" / "last.pt")]
    assert [e["epoch"] for e in events(run_dir) if e["type"] == "epoch"] == [0, 1, 2]


def test_an_oom_injected_through_the_shim_halves_the_batch_for_the_resumed_attempt(world):
    run_dir = world["root"] / "runs" / "oom"
    env = {**world["env"], "YOLOTUI_FAULT": "oom@epoch=1"}  # CUDA's out-of-memory text at epoch 2's first batch
    yolotui(["train", "--backend", "ultralytics", "--model", "yolov9t.yaml", "--data", str(world["data"]),
             "--epochs", "2", "--imgsz", "64", "--batch", "4", "--workers", "0", "--device", "cpu",
             "--project", str(run_dir.parent), "--name", "oom", "--restart-backoff", "0", "plots=False",
             "amp=False"], env, world["root"])
    assert wait_for(lambda: ended(run_dir), timeout=150) == "finished", why(run_dir)
    status = read_status(run_dir)
    assert [a["failure_class"] for a in status.attempts] == ["oom", None]
    assert status.remedies[0]["settings"]["batch_size"] == [4, 2]
    assert status.attempts[1]["command"][-4:] == ["--yolotui-resume", str(run_dir / "weights" / "last.pt"),
                                                  "--yolotui-batch", "2"]
    starts = [e for e in events(run_dir) if e["type"] == "start"]
    assert [s["config"]["batch_size"] for s in starts] == [4, 2]
    assert starts[1]["resumed_from"]["epoch"] == 1 and starts[1]["accumulate"] == 2 * starts[0]["accumulate"]
    assert epochs_of(run_dir) == [0, 1]


def test_an_ultralytics_source_maps_into_the_engine_and_names_what_does_not(world, finished_run):
    from yolotui.backends.ultralytics.start import engine_finetune_options, ultralytics_source

    checkpoint, run_dir = ultralytics_source(str(finished_run))
    assert checkpoint.name == "best.pt" and run_dir == finished_run
    options, notes = engine_finetune_options(checkpoint, run_dir)
    assert options["cfg"] == "gelan-t" and options["imgsz"] == 64 and options["batch_size"] == 4
    assert "gelan-t" in notes[0] and "did not map" in notes[0]
    shutil.copy(checkpoint, world["root"] / "loose.pt")  # a loose .pt: its pickled model names its config
    assert engine_finetune_options(world["root"] / "loose.pt", None)[0]["cfg"] == "gelan-t"


def test_a_stopped_run_stops_at_a_batch_and_its_resume_finishes(world):
    run_dir = world["root"] / "runs" / "stopped"
    env = {**world["env"], "YOLOTUI_STEP_DELAY_S": "2.0"}  # time to stop it inside epoch 2
    yolotui(["train", "--backend", "ultralytics", "--model", "yolov9t.yaml", "--data", str(world["data"]),
             "--epochs", "2", "--imgsz", "64", "--batch", "4", "--workers", "0", "--device", "cpu",
             "--project", str(run_dir.parent), "--name", "stopped", "plots=False", "amp=False"], env, world["root"])
    wait_for(lambda: any(e["type"] == "checkpoint" for e in events(run_dir)), timeout=120)
    yolotui(["stop", str(run_dir)], world["env"], world["root"])
    assert wait_for(lambda: ended(run_dir), timeout=60) == "stopped", why(run_dir)
    assert any(e["type"] == "stop" and e["reason"] == "SIGTERM" for e in events(run_dir))
    assert read_status(run_dir).exit_code == 0  # it ended at a batch boundary, not killed mid-write
    yolotui(["resume", str(run_dir)], world["env"], world["root"])
    assert wait_for(lambda: ended(run_dir), timeout=150) == "finished", why(run_dir)
    assert epochs_of(run_dir) == [0, 1]
