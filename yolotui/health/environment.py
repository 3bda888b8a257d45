"""The torch environment (probed once in a subprocess, cached) against the one a run recorded.

The probe (`python -m yolotui.engine.tools.probe`) takes seconds because it imports torch, so its answer
is cached in yolotui's home folder (`env_probe.json`) and reused while the same Python, torch and
torchvision installation is in place and the answer is younger than `CACHE_TTL_S` (GPU availability
can change with the driver). The TUI process never imports torch itself.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from yolotui.health.subprocess_json import child_env, last_json_object
from yolotui.runs.atomic import atomic_write_json, read_json

CACHE_FILE = "env_probe.json"
CACHE_TTL_S = 6 * 3600
PROBE_TIMEOUT_S = 180
PROBE_MODULE = "yolotui.engine.tools.probe"


@dataclass
class EnvIssue:
    """One difference between the environment now and the run's: severity 'error' | 'warning' | 'info'."""

    what: str
    recorded: Any
    now: Any
    severity: str
    advice: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form."""
        return asdict(self)


@dataclass
class EnvironmentReport:
    """The probed environment, what the run recorded, and the differences that matter."""

    current: dict[str, Any]
    recorded: dict[str, Any] | None
    issues: list[EnvIssue] = field(default_factory=list)
    cached: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form."""
        return asdict(self)


def _install_key() -> dict[str, Any]:
    """What identifies the installation: the interpreter and torch/torchvision files (found, not imported)."""
    key: dict[str, Any] = {"executable": sys.executable}
    for package in ("torch", "torchvision"):
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        origin = spec.origin if spec and spec.origin else None
        if origin:
            version_file = Path(origin).with_name("version.py")
            target = version_file if version_file.exists() else Path(origin)
            try:
                key[package] = [str(target), target.stat().st_mtime]
            except OSError:
                key[package] = [str(target), None]
        else:
            key[package] = None
    return key


def cache_path() -> Path:
    """Where the probe's answer is cached."""
    from yolotui.runs.index import home_dir

    return home_dir() / CACHE_FILE


def run_probe(timeout: float = PROBE_TIMEOUT_S, python: str | None = None) -> dict[str, Any]:
    """Run the probe subprocess now and return its JSON (with `error` set when it failed)."""
    env = child_env()
    try:
        proc = subprocess.run([python or sys.executable, "-m", PROBE_MODULE], capture_output=True, text=True,
                              timeout=timeout, env=env, stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        return {"torch": None, "cuda_available": False, "error": f"probe timed out after {timeout:.0f}s"}
    except OSError as exc:
        return {"torch": None, "cuda_available": False, "error": f"probe could not start: {exc}"}
    data = last_json_object(proc.stdout)
    if data is not None:
        return data
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"torch": None, "cuda_available": False, "error": f"probe failed (exit {proc.returncode}): {tail}"}


def probe_environment(refresh: bool = False, max_age_s: float = CACHE_TTL_S) -> tuple[dict[str, Any], bool]:
    """The environment probe's answer and whether it came from the cache; probes when stale or `refresh`."""
    key = _install_key()
    cached = read_json(cache_path())
    if not refresh and isinstance(cached, dict) and cached.get("key") == json.loads(json.dumps(key)) \
            and time.time() - float(cached.get("probed_at") or 0) < max_age_s \
            and isinstance(cached.get("probe"), dict):
        return cached["probe"], True
    probe = run_probe()
    if not probe.get("error") or probe.get("torch"):
        try:
            atomic_write_json(cache_path(), {"key": key, "probed_at": time.time(), "probe": probe})
        except OSError:
            pass  # a read-only home only costs a re-probe next time
    return probe, False


def _major_minor(version: Any) -> str | None:
    if not isinstance(version, str):
        return None
    parts = version.split("+")[0].split(".")
    return ".".join(parts[:2])


def recorded_used_gpu(recorded: dict[str, Any] | None) -> bool:
    """Whether the run trained on a GPU: a recorded device that is not the CPU (names as the trainer emits them)."""
    if not recorded:
        return False
    if recorded.get("cuda_available"):
        return True
    names = [d.get("name") if isinstance(d, dict) else d for d in recorded.get("devices") or []]
    names.append(recorded.get("device"))
    return any(isinstance(n, str) and n.strip() and n.strip().lower() not in ("cpu", "mps") for n in names)


def compare_environment(recorded: dict[str, Any] | None, current: dict[str, Any]) -> list[EnvIssue]:
    """What differs between the environment the run recorded and `current`, and what it means."""
    issues: list[EnvIssue] = []
    if current.get("error") and not current.get("torch"):
        issues.append(EnvIssue("torch", (recorded or {}).get("torch"), None, "error",
                               f"{current['error']}: training cannot start here"))
        return issues
    if current.get("error"):
        issues.append(EnvIssue("probe", None, current["error"], "warning", "part of the environment is unreadable"))
    if not current.get("cuda_available"):
        used_gpu = recorded_used_gpu(recorded)
        issues.append(EnvIssue("gpu", "CUDA" if used_gpu else None, "none", "error" if used_gpu else "info",
                               "no CUDA GPU visible now: a resume would run on the CPU (very slow)"
                               if used_gpu else "no CUDA GPU visible: training runs on the CPU"))
    if not recorded:
        return issues
    for package in ("torch", "torchvision"):
        was, now = recorded.get(package), current.get(package)
        if not was or not now or str(was) == str(now):
            continue
        same_minor = _major_minor(str(was)) == _major_minor(str(now))
        issues.append(EnvIssue(package, was, now, "info" if same_minor else "warning",
                               "patch release changed: safe to resume" if same_minor else
                               "a different release: loading works, but a resume is not bit-exact"))
    was_cuda, now_cuda = recorded.get("cuda"), current.get("cuda")
    if was_cuda and now_cuda and str(was_cuda) != str(now_cuda):
        issues.append(EnvIssue("cuda", was_cuda, now_cuda, "info", "CUDA runtime changed: results may differ slightly"))
    was_count = recorded.get("world_size") or len(recorded.get("devices") or [])
    if not recorded_used_gpu(recorded):
        was_count = 0
    now_count = int(current.get("device_count") or 0)
    if isinstance(was_count, int) and was_count > 1 and now_count and now_count < was_count:
        issues.append(EnvIssue("gpus", was_count, now_count, "warning",
                               f"the run used {was_count} GPUs, {now_count} visible now: resume with fewer "
                               "(same nominal batch through gradient accumulation)"))
    return issues


def recorded_environment(checkpoint_versions: dict[str, Any] | None, start_event: dict[str, Any]) -> \
        dict[str, Any] | None:
    """The environment a run recorded: the checkpoint's `versions`, completed by the start event."""
    recorded: dict[str, Any] = {}
    event_versions = start_event.get("versions")
    for source in (event_versions, checkpoint_versions):
        if isinstance(source, dict):
            recorded.update({k: v for k, v in source.items() if v is not None})
    for key in ("world_size", "devices", "device"):
        if start_event.get(key) is not None:
            recorded[key] = start_event[key]
    return recorded or None


def diagnose_environment(checkpoint_versions: dict[str, Any] | None = None, start_event: dict[str, Any] | None = None,
                         refresh: bool = False) -> EnvironmentReport:
    """Probe (or reuse the cached probe) and compare with what the run recorded."""
    current, cached = probe_environment(refresh=refresh)
    recorded = recorded_environment(checkpoint_versions, start_event or {})
    return EnvironmentReport(current=current, recorded=recorded, issues=compare_environment(recorded, current),
                             cached=cached)
