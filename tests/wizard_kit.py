"""Helpers for the wizard tests: a launcher that records command lines, a host app, fake diagnoses, run folders."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from textual.app import App

from yolotui.health.drift import DriftItem
from yolotui.health.environment import EnvironmentReport
from yolotui.health.report import RunDiagnosis
from yolotui.health.verdict import CheckpointVerdict
from yolotui.tui.actions import CliResult

TINY_CFG = {
    "nc": 3, "depth_multiple": 1.0, "width_multiple": 1.0,
    "backbone": [[-1, 1, "Conv", [8, 3, 2]], [-1, 1, "Conv", [16, 3, 2]], [-1, 1, "AConv", [16]],
                 [-1, 1, "AConv", [24]], [-1, 1, "AConv", [32]]],
    "head": [[[2, 3, 4], 1, "DDetect", ["nc"]]],
}  # 6 layers: backbone 0..4, detection head 5


class CaptureLauncher:
    """Records every `yolotui ARGS` it is asked to run; answers like the CLI (or fails with `error`)."""

    def __init__(self, run_dir: Path | None = None, error: str | None = None) -> None:
        self.calls: list[list[str]] = []
        self.run_dir = run_dir
        self.error = error

    def __call__(self, args: list[str]) -> CliResult:
        self.calls.append(list(args))
        if self.error:
            return CliResult(list(args), 2, "", f"yolotui: error: {self.error}\n")
        out = (json.dumps({"name": self.run_dir.name, "folder": str(self.run_dir), "state": "running",
                           "verb": "started", "warnings": []}) + "\n") if self.run_dir else "done\n"
        return CliResult(list(args), 0, out, "")


class HostApp(App):
    """An empty app that pushes one screen and keeps what it was dismissed with."""

    def __init__(self, make_screen) -> None:
        super().__init__()
        self.make_screen = make_screen
        self.results: list = []
        self.wizard = None

    def on_mount(self) -> None:
        self.wizard = self.make_screen()
        self.push_screen(self.wizard, self.results.append)


def write_tiny_cfg(folder: Path) -> Path:
    """The tiny 6-layer model as a YAML file."""
    path = Path(folder) / "tiny.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(TINY_CFG, sort_keys=False))
    return path


def make_data(folder: Path, n_train: int = 4, n_val: int = 2, img: int = 64) -> Path:
    """A tiny demo data set (5 classes); its data.yaml."""
    from yolotui.datasets import make_demo_dataset

    return Path(make_demo_dataset(Path(folder), n_train=n_train, n_val=n_val, img=img, seed=0))


def data_with_classes(data_yaml: Path, count: int, name: str) -> Path:
    """A copy of `data_yaml` (same images) that declares `count` classes."""
    data = yaml.safe_load(Path(data_yaml).read_text())
    data["names"] = [f"c{i}" for i in range(count)]
    data.pop("nc", None)
    data.setdefault("path", str(Path(data_yaml).parent))
    out = Path(data_yaml).parent / name
    out.write_text(yaml.safe_dump(data))
    return out


def make_source_run(folder: Path, nc: int = 3, batch: int = 16, data: Path | None = None) -> Path:
    """A finished-looking run folder: opt.yaml (tiny cfg) and weights/best.pt + last.pt with manifests."""
    from _health_fixtures import save_yolotui

    run_dir = Path(folder)
    (run_dir / "weights").mkdir(parents=True, exist_ok=True)
    cfg = write_tiny_cfg(run_dir.parent)
    opt = {"cfg": str(cfg), "data": str(data or ""), "epochs": 10, "batch_size": batch, "imgsz": 64}
    (run_dir / "opt.yaml").write_text(yaml.safe_dump(opt))
    for name in ("best.pt", "last.pt"):
        save_yolotui(run_dir / "weights" / name, epoch=10, epochs=10, opt=opt)
    return run_dir


def verdict(run_dir: Path, name: str, kind: str, epoch: int | None = None, total: int | None = 10,
            step: int = 0, **extra) -> CheckpointVerdict:
    """A CheckpointVerdict for weights/`name`."""
    return CheckpointVerdict(str(Path(run_dir) / "weights" / name), kind, epoch=epoch, step=step,
                             total_epochs=total, age_s=240.0, **extra)


def fake_diagnosis(run_dir: Path, kind: str) -> RunDiagnosis:
    """A diagnosis of each shape the resume wizard handles: resume, oom, finished, corrupt, live, nothing."""
    run_dir = Path(run_dir)
    env = EnvironmentReport(current={"torch": "2.14.1", "devices": []}, recorded=None)
    if kind in ("resume", "oom"):
        failure = ({"failure_class": "oom", "message": "CUDA out of memory", "exit_code": 1} if kind == "oom"
                   else {"failure_class": "killed", "message": "killed by SIGKILL", "exit_signal": 9})
        return RunDiagnosis(str(run_dir), verdict(run_dir, "last.pt", "resumable", 3, step=5),
                            verdict(run_dir, "best.pt", "resumable", 2), "resume",
                            drift=[DriftItem("hyp.yaml", "lr0", 0.01, 0.02)], environment=env,
                            last_failure=failure, advice="resume from last.pt at epoch 3/10", state="failed",
                            recommended_checkpoint=str(run_dir / "weights" / "last.pt"))
    if kind == "finished":
        return RunDiagnosis(str(run_dir), verdict(run_dir, "last.pt", "finished", 10),
                            verdict(run_dir, "best.pt", "finished", 9), "extend-or-finetune", environment=env,
                            advice="training finished (10 epochs): extend it or fine-tune", state="finished",
                            recommended_checkpoint=str(run_dir / "weights" / "last.pt"))
    if kind == "corrupt":
        last = verdict(run_dir, "last.pt", "corrupt", None, None, reasons=["truncated zip: ends before its end"],
                       fallback=str(run_dir / "weights" / "best.pt"), fallback_verdict="resumable",
                       fallback_epoch=2)
        return RunDiagnosis(str(run_dir), last, verdict(run_dir, "best.pt", "resumable", 2), "resume-from-fallback",
                            environment=env, advice="last.pt is damaged: resume from best.pt (epoch 2)",
                            state="interrupted", recommended_checkpoint=str(run_dir / "weights" / "best.pt"))
    if kind == "live":
        return RunDiagnosis(str(run_dir), verdict(run_dir, "last.pt", "resumable", 3),
                            verdict(run_dir, "best.pt", "resumable", 2), "running", environment=env,
                            advice="the run is live: nothing to resume", state="running")
    return RunDiagnosis(str(run_dir), verdict(run_dir, "last.pt", "missing", None, None),
                        verdict(run_dir, "best.pt", "missing", None, None), "restart", environment=env,
                        advice="no usable checkpoint: start the run again", state="failed")


def make_plain_run(folder: Path, batch: int = 16) -> Path:
    """A run folder with only opt.yaml (for wizards fed a fake diagnosis)."""
    run_dir = Path(folder)
    (run_dir / "weights").mkdir(parents=True, exist_ok=True)
    (run_dir / "opt.yaml").write_text(yaml.safe_dump({"batch_size": batch, "epochs": 10}))
    return run_dir
