"""GPU telemetry against an injected fake NVML module (CI has no GPU), and the real path on this machine."""

from __future__ import annotations

import json
import subprocess
from types import SimpleNamespace

import pytest

from yolotui.telemetry import gpu as gpu_module
from yolotui.telemetry.gpu import GpuSampler
from yolotui.telemetry.history import History

MIB = 2**20


class NVMLError(Exception):
    """Like pynvml's: carries the NVML return code in .value."""

    def __init__(self, value):
        super().__init__(f"NVML error {value}")
        self.value = value


class FakeNVML:
    """The slice of pynvml's API the sampler uses, scripted per test."""

    NVMLError = NVMLError
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, gpus, init_error=None):
        self.gpus = gpus  # list of dicts; a value that is an int error code raises NVMLError(code)
        self.init_error = init_error
        self.count_error = None
        self.lost = set()
        self.inits = 0

    def nvmlInit(self):
        self.inits += 1
        if self.init_error is not None:
            raise NVMLError(self.init_error)

    def nvmlShutdown(self):
        pass

    def nvmlSystemGetDriverVersion(self):
        return b"999.1"

    def nvmlDeviceGetCount(self):
        if self.count_error is not None:
            raise NVMLError(self.count_error)
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        if index in self.lost:
            raise NVMLError(gpu_module.ERROR_GPU_IS_LOST)
        return index

    def _field(self, handle, name):
        value = self.gpus[handle][name]
        if isinstance(value, NVMLError):
            raise value
        return value

    def nvmlDeviceGetName(self, h):
        return self._field(h, "name")

    def nvmlDeviceGetTemperature(self, h, sensor):
        assert sensor == self.NVML_TEMPERATURE_GPU
        return self._field(h, "temp")

    def nvmlDeviceGetMemoryInfo(self, h):
        used, total = self._field(h, "mem")
        return SimpleNamespace(used=used * MIB, total=total * MIB, free=(total - used) * MIB)

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=self._field(h, "util"), memory=0)

    def nvmlDeviceGetPowerUsage(self, h):
        return self._field(h, "power_mw")

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return self._field(h, "limit_mw")

    def nvmlDeviceGetFanSpeed(self, h):
        return self._field(h, "fan")

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [SimpleNamespace(pid=pid, usedGpuMemory=mb * MIB if mb is not None else None)
                for pid, mb in self._field(h, "procs")]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h):
        return []


NOT_SUPPORTED = NVMLError(3)


def two_gpus():
    return [
        {"name": b"NVIDIA H200", "temp": 86, "mem": (1000, 143000), "util": 97, "power_mw": 650000,
         "limit_mw": 700000, "fan": NOT_SUPPORTED, "procs": [(111, 900), (222, None)]},
        {"name": "NVIDIA H200", "temp": 40, "mem": (130000, 143000), "util": 5, "power_mw": NOT_SUPPORTED,
         "limit_mw": 700000, "fan": 30, "procs": [(333, 500)]},
    ]


def test_readings_thresholds_and_own_processes():
    sampler = GpuSampler(nvml=FakeNVML(two_gpus()), own_pids={111, 333})
    snap = sampler.sample()
    assert snap.available and snap.reason is None and snap.driver_version == "999.1"
    first, second = snap.gpus
    assert first.name == "NVIDIA H200" and first.temperature_c == 86 and first.utilization_pct == 97
    assert first.memory_used_mb == 1000 and first.memory_total_mb == 143000
    assert (first.power_w, first.power_limit_w) == (650.0, 700.0)
    assert first.hot and not first.memory_high
    assert second.memory_high and not second.hot
    assert first.processes == [(111, 900.0), (222, None)]
    assert first.own_pids == [111] and first.own_memory_mb == 900.0
    assert second.own_pids == [333]
    assert snap.host.mem_total_mb and snap.host.mem_total_mb > 0
    json.dumps(snap.to_dict())


def test_not_supported_blanks_only_that_reading():
    snap = GpuSampler(nvml=FakeNVML(two_gpus())).sample()
    first, second = snap.gpus
    assert first.fan_pct is None and first.temperature_c == 86
    assert second.power_w is None and second.power_limit_w == 700.0 and second.fan_pct == 30


def test_thresholds_at_the_edges():
    gpus = [dict(two_gpus()[1], temp=85, mem=(900, 1000)), dict(two_gpus()[1], temp=84.9, mem=(899, 1000))]
    at, below = GpuSampler(nvml=FakeNVML(gpus)).sample().gpus
    assert at.hot and at.memory_high
    assert not below.hot and not below.memory_high


def test_library_not_found_is_a_clear_no_gpu_state():
    fake = FakeNVML([], init_error=gpu_module.ERROR_LIBRARY_NOT_FOUND)
    sampler = GpuSampler(nvml=fake)
    snap = sampler.sample()
    assert not snap.available and snap.gpus == []
    assert "no NVIDIA GPU" in snap.reason and "libnvidia-ml" in snap.reason
    assert snap.host.mem_total_mb > 0
    sampler.sample()
    assert fake.inits == 1  # a missing library is not retried on every sample


def test_driver_not_loaded_and_zero_gpus():
    snap = GpuSampler(nvml=FakeNVML([], init_error=gpu_module.ERROR_DRIVER_NOT_LOADED)).sample()
    assert not snap.available and "driver is not loaded" in snap.reason
    snap = GpuSampler(nvml=FakeNVML([])).sample()
    assert not snap.available and "no NVIDIA GPU" in snap.reason


def test_a_gpu_that_disappears_and_nvml_that_dies(monkeypatch):
    monkeypatch.setattr(gpu_module, "REINIT_AFTER_S", 0.0)
    fake = FakeNVML(two_gpus())
    sampler = GpuSampler(nvml=fake)
    assert len(sampler.sample().gpus) == 2
    fake.lost.add(1)
    snap = sampler.sample()
    assert snap.available and snap.gpus[0].name and snap.gpus[1].error and "lost" in snap.gpus[1].error
    assert snap.gpus[1].temperature_c is None
    fake.count_error = gpu_module.ERROR_UNINITIALIZED
    snap = sampler.sample()
    assert not snap.available and "stopped answering" in snap.reason
    fake.count_error = None
    fake.lost.clear()
    snap = sampler.sample()  # re-initialised
    assert snap.available and len(snap.gpus) == 2 and fake.inits >= 2


def test_real_nvml_path_reports_cleanly():
    snap = GpuSampler().sample()
    if snap.available:  # a GPU machine
        assert snap.gpus and all(g.name or g.error for g in snap.gpus)
    else:
        assert snap.reason and snap.gpus == []
    assert snap.host.mem_total_mb > 0


def test_gpu_cli_json_and_text(cli_env, yolotui_cmd):
    proc = subprocess.run([*yolotui_cmd, "gpu", "--json"], capture_output=True, text=True, env=cli_env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    snap = json.loads(proc.stdout)
    assert "available" in snap and "host" in snap
    proc = subprocess.run([*yolotui_cmd, "gpu", "--watch", "--count", "2", "--interval", "0.05"],
                          capture_output=True, text=True, env=cli_env, timeout=60)
    assert proc.returncode == 0 and proc.stdout.count("host:") == 2
    bad = subprocess.run([*yolotui_cmd, "gpu", "--interval", "0"], capture_output=True, text=True, env=cli_env)
    assert bad.returncode == 2 and "--interval" in bad.stderr


def test_render_flags_hot_and_marks_the_run():
    from yolotui.commands.gpu import render

    text = render(GpuSampler(nvml=FakeNVML(two_gpus()), own_pids={111}).sample())
    assert "86°C!" in text and "pid 111  900 MiB (run)" in text and "fan n/a" in text


def test_history_is_bounded_and_gives_series():
    fake = FakeNVML(two_gpus())
    sampler = GpuSampler(nvml=fake)
    history = History(maxlen=3)
    for temp in (50, 60, 70, 80):
        fake.gpus[0]["temp"] = temp
        history.append(sampler.sample())
    assert len(history) == 3 and history.maxlen == 3
    assert history.series(0, "temperature_c") == [60, 70, 80]
    assert history.series(5, "temperature_c") == [None, None, None]
    assert len(history.host_series("mem_used_mb")) == 3
    assert history.latest.gpus[0].temperature_c == 80
    with pytest.raises(ValueError):
        History(0)
