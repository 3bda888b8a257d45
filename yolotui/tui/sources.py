"""The TUI's door to the health and telemetry libraries.

Everything here is called from thread workers. A reading that fails becomes a message, never an exception:
the dashboard shows "verdict unavailable" or "no NVIDIA GPU" rather than a traceback.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class CheckpointFacts:
    """What the checkpoint panel and the runs table show for one checkpoint file."""

    name: str
    path: str
    verdict: str  # resumable, finished, corrupt, incomplete, foreign, missing, unknown
    epoch: int | None = None
    total_epochs: int | None = None
    step: int | None = None
    size: int | None = None
    mtime: float | None = None
    reasons: list[str] = field(default_factory=list)


def diagnose(path: Path, total_epochs: int | None = None) -> CheckpointFacts:
    """The verdict on one checkpoint, from yolotui.health."""
    from yolotui.health.verdict import diagnose_checkpoint

    path = Path(path)
    try:
        verdict = diagnose_checkpoint(path, total_epochs=total_epochs)
    except Exception as exc:  # a health bug must not take the TUI down
        return CheckpointFacts(path.name, str(path), "unknown", reasons=[f"diagnosis failed: {exc}"])
    return CheckpointFacts(
        name=path.name,
        path=str(path),
        verdict=str(verdict.verdict),
        epoch=verdict.epoch,
        total_epochs=verdict.total_epochs,
        step=verdict.step,
        size=verdict.size,
        mtime=verdict.mtime,
        reasons=list(verdict.reasons or []),
    )


@dataclass
class HostFacts:
    """CPU and RAM of this machine (duck-types yolotui.telemetry.host.HostReading)."""

    cpu_pct: float | None = None
    mem_used_mb: float | None = None
    mem_total_mb: float | None = None


@dataclass
class SnapshotFacts:
    """A GPU sample (duck-types yolotui.telemetry.gpu.GpuSnapshot) used when no GPU can be read."""

    ts: float
    available: bool = False
    reason: str | None = None
    gpus: list[Any] = field(default_factory=list)
    host: Any = None


class _HostOnlySampler:
    """Samples CPU and RAM with psutil; stands in for GpuSampler when NVML cannot start (no driver, no GPU)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def sample(self, own_pids: Any = None) -> SnapshotFacts:
        host: Any = HostFacts()
        try:
            from yolotui.telemetry.host import read_host  # primes the CPU counter: no false 0 % at start

            host = read_host(own_pids or ())
        except Exception:
            pass
        return SnapshotFacts(ts=time.time(), available=False, reason=self.reason, host=host)


def make_sampler() -> Any:
    """A GPU sampler: yolotui.telemetry's GpuSampler, or a CPU/RAM-only stand-in when it cannot start."""
    try:
        from yolotui.telemetry.gpu import GpuSampler

        return GpuSampler()
    except Exception as exc:
        return _HostOnlySampler(f"no NVIDIA GPU ({type(exc).__name__})")


def safe_sample(sampler: Any, run_pids: set[int] | None = None) -> Any:
    """One sample (the run's processes `run_pids` marked, for their GPU memory and RAM/swap share); a failing
    sampler reads as 'no NVIDIA GPU' with the reason."""
    try:
        return sampler.sample(set(run_pids)) if run_pids else sampler.sample()
    except Exception as exc:
        return _HostOnlySampler(f"GPU reading failed: {exc}").sample()


def run_pids(trainer_pid: int | None) -> set[int]:
    """The trainer's pid and its descendants (torchrun workers), to find the run's own GPU memory."""
    if not trainer_pid:
        return set()
    pids = {int(trainer_pid)}
    try:
        import psutil

        pids.update(child.pid for child in psutil.Process(int(trainer_pid)).children(recursive=True))
    except Exception:
        pass
    return pids
