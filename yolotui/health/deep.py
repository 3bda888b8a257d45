"""`--deep`: load a checkpoint with torch.load(weights_only=True), in a subprocess (this process stays torch-free)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from yolotui.health.subprocess_json import child_env, last_json_object

DEEP_MODULE = "yolotui.engine.tools.deepcheck"


def run_deep_check(path: Path, timeout: float = 600) -> dict[str, Any]:
    """Run `python -m yolotui.engine.tools.deepcheck PATH`; its JSON answer, or {'ok': False, 'error': ...}."""
    env = child_env()
    try:
        proc = subprocess.run([sys.executable, "-m", DEEP_MODULE, str(Path(path).resolve())], capture_output=True,
                              text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"torch.load did not finish within {timeout:.0f}s"}
    except OSError as exc:
        return {"ok": False, "error": f"could not start the deep check: {exc}"}
    data = last_json_object(proc.stdout)
    if data is not None:
        return data
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"ok": False, "error": f"deep check failed (exit {proc.returncode}): {tail}"}
