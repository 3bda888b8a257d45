"""A deterministic stand-in for the GPU sampler (snapshot tests must not read a live GPU)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FakeGpu:
    index: int = 0
    name: str = "NVIDIA H200"
    temperature_c: float | None = 71.0
    memory_used_mb: float | None = 60_000.0
    memory_total_mb: float | None = 143_771.0
    utilization_pct: float | None = 93.0
    power_w: float | None = 512.0
    power_limit_w: float | None = 700.0
    fan_pct: float | None = None
    processes: list = field(default_factory=lambda: [(4242, 40_000.0)])
    hot: bool = False
    memory_high: bool = False


@dataclass
class FakeHost:
    cpu_pct: float | None = 12.0
    mem_used_mb: float | None = 8000.0
    mem_total_mb: float | None = 32000.0
    swap_used_mb: float | None = 512.0
    swap_total_mb: float | None = 8192.0
    run_rss_mb: float | None = 3072.0
    run_swap_mb: float | None = 0.0


@dataclass
class FakeSnapshot:
    ts: float
    available: bool
    reason: str | None
    gpus: list
    host: FakeHost


class FakeSampler:
    """Returns the same reading every time: one H200, or no GPU when `gpu=False`."""

    def __init__(self, gpu: bool = True, temperature: float = 71.0) -> None:
        self.gpu = gpu
        self.temperature = temperature
        self.calls = 0

    def sample(self, own_pids=None) -> FakeSnapshot:
        self.calls += 1
        if not self.gpu:
            return FakeSnapshot(1.0, False, "no NVIDIA GPU", [], FakeHost())
        return FakeSnapshot(1.0, True, None, [FakeGpu(temperature_c=self.temperature)], FakeHost())


async def wait_until(pilot, predicate, timeout: float = 8.0, step: float = 0.05) -> bool:
    """Pause the app until `predicate()` is true; False after `timeout` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await pilot.pause(step)
    return bool(predicate())


def rendered(widget) -> str:
    """The plain text a Static-like widget shows now."""
    return str(widget.render())
