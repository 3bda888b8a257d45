"""A scripted stand-in for pynvml: the GPUs' state is plain data, so a test plays any GPU it needs.

In-process: `FakeNVML(gpus)` (an object with pynvml's API) for `GpuSampler(nvml=...)`. Across processes:
this file is also a module with pynvml's API at module level, reading its state from the JSON file that
FAKE_NVML_STATE names (re-read when it changes), for YOLOTUI_NVML_MODULE=<this file> in the supervisor's GPU
watcher. The scenarios: `healthy`, `thermal` (thermally throttled to 56 %), `power_cap`, `ecc` (ECC on, with
counts a test raises), `xid` (an Xid pending), `lost` (fell off the bus), `garbage` (nonsense values).

A GPU's dict: name, temp, mem (used, total MiB), util, power_mw, limit_mw, fan, procs [(pid, MiB)], reasons
(the clocks-event mask), sm / sm_max / memclk / memclk_max (MHz), slowdown (°C), ecc_mode (1, 0 or None:
unsupported), ecc {"volatile": [corrected, uncorrected], "aggregate": [...]}, pcie (gen, gen max, width, width
max), energy_mj, bus_id, lost (bool), hang (names of functions that sleep `hang_s` seconds), xids ([int]).
A value that is None raises NOT_SUPPORTED.
"""

from __future__ import annotations

import json
import os
import time
from types import SimpleNamespace

MIB = 2**20
NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
nvmlEventTypeXidCriticalError = 0x08
NOT_SUPPORTED, TIMEOUT, GPU_IS_LOST = 3, 10, 15


class NVMLError(Exception):
    """Like pynvml's: carries the NVML return code in .value."""

    def __init__(self, value):
        super().__init__(f"NVML error {value}")
        self.value = value


def healthy(index: int = 0, **changes) -> dict:
    """A busy, healthy H200."""
    gpu = {"name": "NVIDIA H200", "temp": 64, "mem": (60000, 143771), "util": 97, "power_mw": 520000,
           "limit_mw": 700000, "fan": None, "procs": [], "reasons": 0, "sm": 1980, "sm_max": 1980,
           "memclk": 3201, "memclk_max": 3201, "slowdown": 90, "ecc_mode": 1,
           "ecc": {"volatile": [0, 0], "aggregate": [0, 0]}, "pcie": (5, 5, 16, 16), "energy_mj": 5_000_000_000,
           "bus_id": f"00000000:{0x18 + index:02X}:00.0", "lost": False, "hang": [], "xids": []}
    gpu.update(changes)
    return gpu


def scenario(name: str, index: int = 0, **changes) -> dict:
    """One GPU in the named state (see the module docstring)."""
    states = {
        "healthy": {},
        "thermal": {"temp": 91, "reasons": 0x40 | 0x20 | 0x08, "sm": 1100},
        "power_cap": {"temp": 70, "reasons": 0x04, "sm": 1500, "power_mw": 700000},
        "ecc": {"ecc": {"volatile": [3, 0], "aggregate": [10, 0]}},
        "xid": {"xids": [79]},
        "lost": {"lost": True},
        "garbage": {"temp": -500, "mem": (9e18, 10), "util": 1e9, "power_mw": -5, "sm": 4e9, "sm_max": 0,
                    "reasons": "thermal", "energy_mj": -1, "pcie": (99, 0, 0, 999), "ecc_mode": "on"},
    }
    return healthy(index, **{**states[name], **changes})


class FakeNVML:
    """The slice of pynvml's API yolotui uses, over a list of GPU dicts (see the module docstring)."""

    NVMLError = NVMLError
    NVML_TEMPERATURE_GPU = NVML_TEMPERATURE_GPU
    NVML_CLOCK_SM = NVML_CLOCK_SM
    NVML_CLOCK_MEM = NVML_CLOCK_MEM
    NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
    NVML_MEMORY_ERROR_TYPE_CORRECTED = NVML_MEMORY_ERROR_TYPE_CORRECTED
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    NVML_VOLATILE_ECC = NVML_VOLATILE_ECC
    NVML_AGGREGATE_ECC = NVML_AGGREGATE_ECC
    nvmlEventTypeXidCriticalError = nvmlEventTypeXidCriticalError

    def __init__(self, gpus, hang_s: float = 5.0, events: bool = True):
        self.gpus = gpus
        self.hang_s = hang_s
        self.events = events  # False: no NVML events (the kernel-log fallback is used)
        self.inits = 0
        self.delivered: dict[int, int] = {}

    # -- plumbing --------------------------------------------------------------------------------------------
    def _gpu(self, handle, func):
        gpu = self.gpus[handle]
        if gpu.get("lost"):
            raise NVMLError(GPU_IS_LOST)
        if func in gpu.get("hang") or ():
            time.sleep(self.hang_s)
        return gpu

    def _value(self, handle, func, key):
        value = self._gpu(handle, func).get(key)
        if value is None:
            raise NVMLError(NOT_SUPPORTED)
        return value

    def nvmlInit(self):
        self.inits += 1

    def nvmlShutdown(self):
        pass

    def nvmlSystemGetDriverVersion(self):
        return "999.1"

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        if self.gpus[index].get("lost"):
            raise NVMLError(GPU_IS_LOST)
        return index

    def nvmlDeviceGetIndex(self, handle):
        return handle

    # -- readings ----------------------------------------------------------------------------------------------
    def nvmlDeviceGetName(self, h):
        return self._value(h, "nvmlDeviceGetName", "name")

    def nvmlDeviceGetTemperature(self, h, sensor):
        return self._value(h, "nvmlDeviceGetTemperature", "temp")

    def nvmlDeviceGetMemoryInfo(self, h):
        used, total = self._value(h, "nvmlDeviceGetMemoryInfo", "mem")
        return SimpleNamespace(used=used * MIB, total=total * MIB, free=(total - used) * MIB)

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=self._value(h, "nvmlDeviceGetUtilizationRates", "util"), memory=0)

    def nvmlDeviceGetPowerUsage(self, h):
        return self._value(h, "nvmlDeviceGetPowerUsage", "power_mw")

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return self._value(h, "nvmlDeviceGetEnforcedPowerLimit", "limit_mw")

    def nvmlDeviceGetFanSpeed(self, h):
        return self._value(h, "nvmlDeviceGetFanSpeed", "fan")

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [SimpleNamespace(pid=pid, usedGpuMemory=mb * MIB if mb is not None else None)
                for pid, mb in self._value(h, "nvmlDeviceGetComputeRunningProcesses", "procs")]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h):
        return []

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return self._value(h, "nvmlDeviceGetCurrentClocksEventReasons", "reasons")

    def nvmlDeviceGetClockInfo(self, h, clock):
        return self._value(h, "nvmlDeviceGetClockInfo", "sm" if clock == NVML_CLOCK_SM else "memclk")

    def nvmlDeviceGetMaxClockInfo(self, h, clock):
        return self._value(h, "nvmlDeviceGetMaxClockInfo", "sm_max" if clock == NVML_CLOCK_SM else "memclk_max")

    def nvmlDeviceGetTemperatureThreshold(self, h, threshold):
        return self._value(h, "nvmlDeviceGetTemperatureThreshold", "slowdown")

    def nvmlDeviceGetEccMode(self, h):
        mode = self._value(h, "nvmlDeviceGetEccMode", "ecc_mode")
        return [mode, mode]

    def nvmlDeviceGetTotalEccErrors(self, h, error_type, counter):
        counts = self._value(h, "nvmlDeviceGetTotalEccErrors", "ecc")
        return counts["volatile" if counter == NVML_VOLATILE_ECC else "aggregate"][error_type]

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return self._value(h, "nvmlDeviceGetCurrPcieLinkGeneration", "pcie")[0]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):
        return self._value(h, "nvmlDeviceGetMaxPcieLinkGeneration", "pcie")[1]

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return self._value(h, "nvmlDeviceGetCurrPcieLinkWidth", "pcie")[2]

    def nvmlDeviceGetMaxPcieLinkWidth(self, h):
        return self._value(h, "nvmlDeviceGetMaxPcieLinkWidth", "pcie")[3]

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        return self._value(h, "nvmlDeviceGetTotalEnergyConsumption", "energy_mj")

    def nvmlDeviceGetPciInfo(self, h):
        return SimpleNamespace(busId=self._value(h, "nvmlDeviceGetPciInfo", "bus_id"))

    # -- Xid events ---------------------------------------------------------------------------------------------
    def nvmlEventSetCreate(self):
        if not self.events:
            raise NVMLError(NOT_SUPPORTED)
        return "event-set"

    def nvmlDeviceRegisterEvents(self, handle, types, event_set):
        if not self.events:
            raise NVMLError(NOT_SUPPORTED)

    def nvmlEventSetWait_v2(self, event_set, timeout_ms):
        for index, gpu in enumerate(self.gpus):
            xids = gpu.get("xids") or []
            done = self.delivered.get(index, 0)
            if done < len(xids):
                self.delivered[index] = done + 1
                return SimpleNamespace(device=index, eventType=nvmlEventTypeXidCriticalError, eventData=xids[done])
        raise NVMLError(TIMEOUT)

    def nvmlEventSetFree(self, event_set):
        pass


# ------------------------------------------------------------------ the module-level API, from FAKE_NVML_STATE

_state: dict = {"mtime": None, "fake": None}


def _fake() -> FakeNVML:
    path = os.environ["FAKE_NVML_STATE"]
    mtime = os.stat(path).st_mtime_ns
    if _state["fake"] is None or mtime != _state["mtime"]:
        with open(path) as handle:
            data = json.load(handle)
        delivered = _state["fake"].delivered if _state["fake"] is not None else {}
        fake = FakeNVML(data["gpus"], events=data.get("events", True))
        fake.delivered = delivered
        _state.update(fake=fake, mtime=mtime)
    return _state["fake"]


def write_state(path, gpus, events: bool = True) -> None:
    """Write the state the module-level API plays (atomically, with a new mtime)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as handle:
        json.dump({"gpus": gpus, "events": events}, handle)
    os.replace(tmp, path)
    now = time.time_ns()
    os.utime(path, ns=(now, now))


def __getattr__(name):  # pynvml's functions at module level
    if name.startswith("nvml"):
        return getattr(_fake(), name)
    raise AttributeError(name)
