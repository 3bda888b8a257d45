"""The trainer process keeps freed host memory: big buffers allocated again do not fault their pages in again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import resource, sys
import numpy as np
from yolotui.engine.train.memory_format import keep_freed_memory
print(keep_freed_memory())
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def step():  # a training step's pattern: many activation-sized buffers alive at once, then all freed
    buffers = [np.ones(1 << 20, np.float32) for _ in range(50)]  # 50 x 4 MiB
    del buffers
step()
before = faults()
for _ in range(5):
    step()
print("faults", faults() - before)
"""


def _run(**env: str) -> tuple[str, int]:
    root = str(Path(__file__).resolve().parent.parent)
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": root, **env})
    assert done.returncode == 0, done.stderr[-2000:]
    message, faults = done.stdout.strip().splitlines()
    return message, int(faults.split()[1])


def test_freed_buffers_are_reused_without_page_faults_unless_released():
    message, kept = _run()
    assert "kept for reuse" in message
    default_message, released = _run(YOLOTUI_HOST_MEMORY="release")
    assert "defaults" in default_message
    pages = 5 * 50 * (4 << 20) // 4096
    assert released > pages // 2  # the C library's defaults fault every buffer in again
    assert kept < pages // 20
