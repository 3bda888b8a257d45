"""Convergence: gelan-t trained from scratch on the demo data on the CPU reaches mAP50 >= 0.5.

Slow (about five minutes on 2 quiet CPU cores): runs bench/bench_convergence.py's yolotui side with its defaults
(30 epochs, 256 px, batch 16, the recipe `yolotui train` picks: the short-run recipe) in a subprocess and checks
its JSON figures, so the test and the quoted benchmark are the same measurement (the short-run recipe's runs reached
mAP50 0.58-0.63 and mAP50-95 0.45; the thresholds leave room for noise).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_gelan_t_reaches_map50_half_on_demo_data():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_convergence.py"), "--sides", "yolotui",
                          "--json"], env=env, capture_output=True, text=True, check=True, timeout=3500)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["side"] == "yolotui" and result["hyp"] == "hyp.short-run.yaml", result
    per_epoch = result["per_epoch"]
    assert len(per_epoch) == result["epochs"], "one results row per epoch"
    assert per_epoch[0]["mAP50"] < 0.5 <= result["final_mAP50"], result
    assert result["reached_at_epoch"] is not None and result["final_mAP50-95"] > 0.35, result
