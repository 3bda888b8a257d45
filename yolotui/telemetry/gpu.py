"""GPU readings through NVML (nvidia-ml-py, imported as `pynvml`), robust to anything NVML may say.

Every NVML call goes through `query()`, which turns an NVMLError (or any other failure of the call) into None
("not available") for that one reading, so an unsupported fan sensor or a permission-restricted power reading
never hides the rest. Every call runs under a time limit (telemetry/guard.py): a reading that takes over 1 s
is skipped for that sample (named in the reading's `skipped`) and can never block the caller; an implausible
answer (negative, huge, the wrong type) is no reading either (telemetry/sanity.py). A missing library or
driver, or no GPU at all, gives a snapshot with `available=False`, a reason a user can read, and the host's
CPU and memory. A GPU that falls off the bus mid-run shows up as a
reading with `error` set; a dead NVML is re-initialised on a later sample.

Beyond temperature, memory, utilisation and power, each reading has the clock-event (throttle) reasons in
words and clocks against their maxima (telemetry/clocks.py), ECC counts (telemetry/ecc.py), and the PCIe link
and energy used (telemetry/board.py).

The NVML module is injectable (`GpuSampler(nvml=fake)`, or YOLOTUI_NVML_MODULE naming a module or .py file for
child processes: telemetry/nvml_module.py) so all of this is tested without a GPU.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from yolotui.telemetry import board, clocks, ecc, sanity
from yolotui.telemetry.guard import ReadingSkipped, TimedCaller
from yolotui.telemetry.host import HostReading, read_host

HOT_TEMPERATURE_C = 85
HIGH_MEMORY_FRACTION = 0.90
REINIT_AFTER_S = 30.0

# NVML return codes (nvml.h), compared by value so any NVMLError subclass works.
ERROR_UNINITIALIZED = 1
ERROR_NOT_FOUND = 6
ERROR_DRIVER_NOT_LOADED = 9
ERROR_LIBRARY_NOT_FOUND = 12
ERROR_GPU_IS_LOST = 15
ERRORS_DEVICE_GONE = frozenset({ERROR_NOT_FOUND, ERROR_GPU_IS_LOST})


@dataclass
class GpuReading:
    """One GPU's readings; None where NVML could not give that reading."""

    index: int
    name: str | None = None
    temperature_c: float | None = None
    memory_used_mb: float | None = None
    memory_total_mb: float | None = None
    utilization_pct: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    fan_pct: float | None = None
    processes: list[tuple[int, float | None]] = field(default_factory=list)  # (pid, used MiB)
    hot: bool = False  # temperature >= HOT_TEMPERATURE_C
    memory_high: bool = False  # memory used >= HIGH_MEMORY_FRACTION of total
    # Further fields:
    own_pids: list[int] = field(default_factory=list)  # the run's processes on this GPU
    own_memory_mb: float | None = None  # their memory, where NVML reports it
    error: str | None = None  # set when the GPU itself stopped answering (fell off the bus)
    # Why it is slow, and its health (telemetry/clocks.py, ecc.py, board.py); None where not supported:
    throttle_mask: int | None = None  # clock-event reasons as NVML's bit mask
    throttle_reasons: list[str] | None = None  # the same in words: 'thermal (hardware)', 'power cap', 'idle' ...
    throttled: bool | None = None  # a reason that slows a busy GPU is set (not idle / sync boost)
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    sm_clock_pct: float | None = None
    mem_clock_mhz: float | None = None
    mem_clock_max_mhz: float | None = None
    mem_clock_pct: float | None = None
    slowdown_temperature_c: float | None = None  # where the GPU starts slowing itself down
    ecc_enabled: bool | None = None
    ecc_volatile: dict[str, int | None] | None = None  # {'corrected': n, 'uncorrected': n} since the driver loaded
    ecc_aggregate: dict[str, int | None] | None = None  # the same over the board's lifetime
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    energy_j: float | None = None  # since the driver loaded
    pci_bus_id: str | None = None
    skipped: list[str] = field(default_factory=list)  # readings skipped this sample: over the time limit

    @property
    def memory_fraction(self) -> float | None:
        """Memory used as a fraction of total, or None."""
        if self.memory_used_mb is None or not self.memory_total_mb:
            return None
        return self.memory_used_mb / self.memory_total_mb

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form."""
        return asdict(self)


@dataclass
class GpuSnapshot:
    """All GPUs at one instant, or `available=False` with the reason; the host readings either way."""

    ts: float
    available: bool
    reason: str | None
    gpus: list[GpuReading]
    host: HostReading
    driver_version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form."""
        return asdict(self)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class GpuSampler:
    """Takes GPU snapshots; initialises NVML lazily and survives every NVML failure."""

    def __init__(self, nvml: Any = None, own_pids: Iterable[int] = (), limit_s: float | None = None) -> None:
        self._nvml = nvml
        self.guard = TimedCaller() if limit_s is None else TimedCaller(limit_s)
        self._injected = nvml is not None
        self._ready = False
        self._failure: str | None = None
        self._failed_at = 0.0
        self._permanent = False
        self.own_pids: set[int] = set(own_pids)

    # -- NVML plumbing ---------------------------------------------------------------------------
    @property
    def nvml(self) -> Any:
        """The NVML module in use (None until the first sample loaded it)."""
        return self._nvml

    @property
    def ready(self) -> bool:
        """True while NVML is initialised."""
        return self._ready

    def _error_type(self) -> type[BaseException]:
        return getattr(self._nvml, "NVMLError", Exception)

    def query(self, func: Callable[..., Any], *args: Any) -> Any:
        """`func(*args)` through the guard, or None when it raises or takes over the time limit (that reading is
        not available this sample)."""
        if func is None:
            return None
        try:
            return self.guard.call(func, *args)
        except Exception:  # noqa: BLE001 - NVMLError, ReadingSkipped, or a hostile NVML's garbage
            return None

    def call(self, func: Callable[..., Any], *args: Any) -> Any:
        """`func(*args)` through the guard: its value, its exception, or ReadingSkipped (over the time limit)."""
        return self.guard.call(func, *args)

    def _init(self) -> str | None:
        """Initialise NVML; None on success, else the reason there are no readings."""
        if self._ready:
            return None
        if self._permanent or (self._failure and time.monotonic() - self._failed_at < REINIT_AFTER_S):
            return self._failure
        if self._nvml is None:
            from yolotui.telemetry.nvml_module import load_nvml

            self._nvml, problem = load_nvml()
            if self._nvml is None:
                self._permanent = True
                return self._fail(problem or "no GPU readings")
        try:
            self.guard.call(self._nvml.nvmlInit)
        except ReadingSkipped:
            return self._fail(f"no NVIDIA GPU readings: NVML did not start within {self.guard.limit_s:g} s")
        except self._error_type() as exc:
            code = getattr(exc, "value", None)
            if code == ERROR_LIBRARY_NOT_FOUND:
                self._permanent = True
                return self._fail("no NVIDIA GPU: the NVIDIA driver library (libnvidia-ml.so) is not installed")
            if code == ERROR_DRIVER_NOT_LOADED:
                return self._fail("no NVIDIA GPU: the NVIDIA driver is not loaded")
            return self._fail(f"no NVIDIA GPU: NVML failed to start ({_text(exc) or type(exc).__name__})")
        except OSError as exc:
            self._permanent = True
            return self._fail(f"no NVIDIA GPU: NVML could not be loaded ({exc})")
        except Exception as exc:  # noqa: BLE001 - a hostile NVML: no readings this time, try again later
            return self._fail(f"no NVIDIA GPU: NVML failed to start ({type(exc).__name__})")
        self._ready = True
        self._failure = None
        return None

    def _fail(self, reason: str) -> str:
        self._failure = reason
        self._failed_at = time.monotonic()
        return reason

    def _lost(self, reason: str) -> str:
        """NVML stopped answering after init: shut it down and try again on a later sample."""
        self._ready = False
        self.query(self._nvml.nvmlShutdown)  # guarded: a broken NVML may hang here too
        return self._fail(reason)

    def close(self) -> None:
        """Shut NVML down (safe to call twice)."""
        if self._ready:
            self._ready = False
            self.query(self._nvml.nvmlShutdown)

    # -- readings ------------------------------------------------------------------------------------
    def sample(self, own_pids: Iterable[int] | None = None) -> GpuSnapshot:
        """One snapshot of every GPU (the run's processes, `own_pids` or the sampler's, marked)."""
        own = set(own_pids) if own_pids is not None else self.own_pids
        host = read_host(own)
        now = time.time()
        self.guard.begin_sample()
        reason = self._init()
        if reason:
            return GpuSnapshot(now, False, reason, [], host)
        nvml = self._nvml
        try:
            count = sanity.whole(self.call(nvml.nvmlDeviceGetCount), (0.0, 1024.0))
        except ReadingSkipped:
            return GpuSnapshot(now, False, f"NVML is not answering (a reading took over {self.guard.limit_s:g} s)",
                               [], host)
        except self._error_type() as exc:
            gone = " (a GPU is lost: fell off the bus)" if getattr(exc, "value", None) in ERRORS_DEVICE_GONE else ""
            return GpuSnapshot(now, False, self._lost(f"NVML stopped answering: {_text(exc)}{gone}"), [], host)
        except Exception as exc:  # noqa: BLE001 - a hostile NVML
            return GpuSnapshot(now, False, f"NVML gave a bad answer: {type(exc).__name__}", [], host)
        if count is None:
            return GpuSnapshot(now, False, "NVML gave a nonsensical GPU count", [], host)
        if count == 0:
            return GpuSnapshot(now, False, "no NVIDIA GPU found (the driver sees none)", [], host)
        driver = _text(self.query(nvml.nvmlSystemGetDriverVersion)) if hasattr(nvml, "nvmlSystemGetDriverVersion") \
            else None
        gpus = [self._read_gpu(index, own) for index in range(count)]
        return GpuSnapshot(now, True, None, gpus, host, driver)

    def _read_gpu(self, index: int, own: set[int]) -> GpuReading:
        nvml = self._nvml
        reading = GpuReading(index=index)
        self.guard.new_budget()  # a hung reading of one GPU costs the next GPU nothing
        skipped_before = len(self.guard.skipped)
        try:
            handle = self.call(nvml.nvmlDeviceGetHandleByIndex, index)
        except ReadingSkipped:
            reading.error = f"GPU not answering (a reading took over {self.guard.limit_s:g} s)"
            return reading
        except self._error_type() as exc:
            code = getattr(exc, "value", None)
            reading.error = "GPU fell off the bus (lost)" if code in ERRORS_DEVICE_GONE else \
                f"GPU not readable: {_text(exc)}"
            return reading
        except Exception as exc:  # noqa: BLE001 - a hostile NVML
            reading.error = f"GPU not readable: {type(exc).__name__}"
            return reading
        name = _text(self.query(nvml.nvmlDeviceGetName, handle))
        reading.name = name[:96] if name else None
        temperature = self.query(nvml.nvmlDeviceGetTemperature, handle, getattr(nvml, "NVML_TEMPERATURE_GPU", 0))
        reading.temperature_c = sanity.number(temperature, sanity.TEMPERATURE_C)
        memory = self.query(nvml.nvmlDeviceGetMemoryInfo, handle)
        used = sanity.number(getattr(memory, "used", None), sanity.MEMORY_BYTES)
        total = sanity.number(getattr(memory, "total", None), sanity.MEMORY_BYTES)
        if used is not None and total and used <= total:
            reading.memory_used_mb = used / 2**20
            reading.memory_total_mb = total / 2**20
        utilization = self.query(nvml.nvmlDeviceGetUtilizationRates, handle)
        reading.utilization_pct = sanity.number(getattr(utilization, "gpu", None), sanity.PERCENT)
        power = sanity.number(self.query(nvml.nvmlDeviceGetPowerUsage, handle), sanity.POWER_MW)
        reading.power_w = power / 1000.0 if power is not None else None
        limit = sanity.number(self.query(nvml.nvmlDeviceGetEnforcedPowerLimit, handle), sanity.POWER_MW)
        reading.power_limit_w = limit / 1000.0 if limit else None
        reading.fan_pct = sanity.number(self.query(nvml.nvmlDeviceGetFanSpeed, handle), sanity.FAN_PERCENT)
        clocks.read_clocks(reading, self.query, nvml, handle)
        ecc.read_ecc(reading, self.query, nvml, handle)
        board.read_board(reading, self.query, nvml, handle)
        reading.processes = self._processes(handle)
        reading.skipped = list(dict.fromkeys(self.guard.skipped[skipped_before:]))
        reading.own_pids = sorted(pid for pid, _ in reading.processes if pid in own)
        own_memory = [mb for pid, mb in reading.processes if pid in own and mb is not None]
        reading.own_memory_mb = sum(own_memory) if own_memory else None
        reading.hot = reading.temperature_c is not None and reading.temperature_c >= HOT_TEMPERATURE_C
        fraction = reading.memory_fraction
        reading.memory_high = fraction is not None and fraction >= HIGH_MEMORY_FRACTION
        return reading

    def _processes(self, handle: Any) -> list[tuple[int, float | None]]:
        memory_by_pid: dict[int, float | None] = {}
        for name in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
            func = getattr(self._nvml, name, None)
            listed = self.query(func, handle) if func is not None else None
            for process in listed if isinstance(listed, (list, tuple)) else []:
                pid = sanity.whole(getattr(process, "pid", None), (1.0, float(2 ** 31)))
                if pid is None:
                    continue
                used = getattr(process, "usedGpuMemory", None)
                used = sanity.number(used, sanity.MEMORY_BYTES)
                mb = used / 2**20 if used is not None else None
                previous = memory_by_pid.get(pid)
                memory_by_pid[pid] = mb if previous is None else previous + (mb or 0.0)
        return sorted(memory_by_pid.items())
