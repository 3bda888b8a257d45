"""yolotui.health, yolotui.telemetry and yolotui.runs never import torch (checked in a clean interpreter)."""

from __future__ import annotations

import subprocess
import sys

from _health_fixtures import save_yolotui

CHECK = r"""
import importlib, pkgutil, sys
import yolotui.health, yolotui.telemetry, yolotui.runs
names = []
for package in (yolotui.health, yolotui.telemetry, yolotui.runs):
    for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        importlib.import_module(module.name)
        names.append(module.name)
import yolotui.commands.doctor, yolotui.commands.gpu
from yolotui.health.verdict import diagnose_checkpoint
from yolotui.jobs.doctor import diagnose_run
from yolotui.telemetry.gpu import GpuSampler
verdict = diagnose_checkpoint(sys.argv[1])
assert verdict.verdict == "resumable", verdict.reasons
diagnose_run(sys.argv[2], environment=False, logind=False)
GpuSampler().sample()
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "torchvision") or m.startswith("yolotui.engine"))
assert not heavy, heavy
assert "yolotui.health.drift" in names and "yolotui.telemetry.gpu" in names and "yolotui.runs.status" in names
print("ok", len(names))
"""


def test_health_telemetry_runs_never_import_torch(tmp_path, cli_env):
    checkpoint = tmp_path / "run" / "weights" / "last.pt"
    save_yolotui(checkpoint)
    proc = subprocess.run([sys.executable, "-c", CHECK, str(checkpoint), str(tmp_path / "run")], capture_output=True,
                          text=True, env=cli_env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok")
