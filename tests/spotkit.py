"""Helpers for the spot-machine tests: a checkpointing stand-in trainer, CLI calls, settings, run-end waits."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import yaml

PY = sys.executable

# A stand-in trainer for `yolotui exec`: writes weights/last.pt (random bytes) and its manifest the way the
# engine does (pending manifest, checkpoint renamed into place, manifest renamed last) every PERIOD seconds,
# COUNT times; on SIGTERM it writes one more checkpoint (marked "on SIGTERM") and exits 0.
CHECKPOINTER = r"""
import hashlib, json, os, signal, sys, time
from pathlib import Path
weights = Path(os.environ["YOLOTUI_RUN_DIR"]) / "weights"
weights.mkdir(exist_ok=True)
size, period, count = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
def save(step, note=""):
    data = os.urandom(size)
    manifest = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "epoch": 0, "step": step,
                "epochs": 1, "note": note}
    (weights / "last.pt.json.next").write_text(json.dumps(manifest))
    (weights / ".last.pt.tmp").write_bytes(data)
    os.replace(weights / ".last.pt.tmp", weights / "last.pt")
    os.replace(weights / "last.pt.json.next", weights / "last.pt.json")
    print(f"checkpoint step {step} {note}", flush=True)
print("up", flush=True)
for step in range(1, count + 1):
    save(step)
    deadline = time.monotonic() + period
    while time.monotonic() < deadline and not stop:
        time.sleep(0.02)
    if stop:
        save(step + 1, "on SIGTERM")
        sys.exit(0)
"""


def cli(env: dict[str, str], *args: str, timeout: float = 120, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`python -m yolotui ARGS` against this checkout."""
    return subprocess.run([PY, "-m", "yolotui", *args], env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=cwd)


def exec_checkpointer(env: dict[str, str], project: Path, name: str, *flags: str, size: int = 20000,
                      period: float = 0.5, count: int = 6) -> Path:
    """Start the stand-in trainer under `yolotui exec` with `flags`; returns the run folder."""
    done = cli(env, "exec", "--project", str(project), "--name", name, *flags, "--", PY, "-c", CHECKPOINTER,
               str(size), str(period), str(count))
    assert done.returncode == 0, done.stdout + done.stderr
    return Path(done.stdout.strip().splitlines()[-1])


def write_settings(home: Path, settings: dict) -> None:
    """settings.yaml in the yolotui state folder `home` (YOLOTUI_HOME)."""
    folder = Path(home) / "config"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "settings.yaml").write_text(yaml.safe_dump(settings))


def notify_hook(path: Path) -> dict:
    """settings.yaml's `notify` entry whose command appends each notification's JSON to `path`."""
    code = f"import sys; open({str(path)!r}, 'a').write(sys.stdin.read().replace(chr(10), ' ') + chr(10))"
    return {"command": f"{PY} -c \"{code}\"", "timeout_s": 10}


def notifications(path: Path) -> list[dict]:
    """The notifications the hook recorded."""
    try:
        text = Path(path).read_text()
    except OSError:
        return []
    found = []
    for line in text.splitlines():
        if line.strip():
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
    return found


def wait_until(predicate, timeout: float, what: str, interval: float = 0.1):
    """Poll `predicate` until it returns something truthy; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
