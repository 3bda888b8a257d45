"""Throttling, clocks, ECC, Xid, a lost GPU and a hostile NVML, against the scripted NVML (tests/fake_nvml.py);
the run GPU summary, the gpu-fault class and the slowness verdicts built on them."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from fake_nvml import FakeNVML, scenario, write_state

from yolotui.runs.status_schema import status_problem
from yolotui.supervisor import policy
from yolotui.telemetry import clocks
from yolotui.telemetry.gpu import GpuSampler
from yolotui.telemetry.gpu_summary import GpuSummary, summary_lines
from yolotui.telemetry.guard import ReadingSkipped, TimedCaller
from yolotui.telemetry.slowness import DATA_BOUND, LOW_UTILISATION, THROTTLED, verdicts
from yolotui.telemetry.xid import KernelLog, XidWatcher, parse_kernel_line

FAKE = str(Path(__file__).with_name("fake_nvml.py"))


def sample(*gpus, **kwargs):
    return GpuSampler(nvml=FakeNVML(list(gpus), **kwargs)).sample()


def feed(summary: GpuSummary, fake: FakeNVML, count: int, step_s: float = 5.0, start: float = 1000.0,
         xids=()) -> list[str]:
    """Feed `count` samples of `fake`, `step_s` apart; returns the news."""
    sampler = GpuSampler(nvml=fake)
    news = []
    for i in range(count):
        data = sampler.sample().to_dict()
        data["ts"] = start + i * step_s
        data["xids"] = list(xids) if i == count - 1 else []
        news += summary.add(data)
    return news


def test_a_thermally_throttled_gpu_in_words_and_in_its_summary():
    gpu = sample(scenario("thermal")).gpus[0]
    assert gpu.throttled and gpu.throttle_reasons == ["thermal (hardware)", "thermal (software)", "hardware slowdown"]
    assert (gpu.sm_clock_mhz, gpu.sm_clock_max_mhz, gpu.sm_clock_pct) == (1100, 1980, 55.6)
    assert gpu.slowdown_temperature_c == 90 and gpu.temperature_c == 91
    assert clocks.describe(gpu) == "throttled: thermal, SM 1100/1980 MHz (56 %)"
    summary = GpuSummary(1, interval_s=5.0)
    news = feed(summary, FakeNVML([scenario("thermal")]), 6)
    assert news == ["throttle"]  # once, on the second throttled sample, not on every one
    data = summary.to_dict()
    assert data["throttled_pct"] == 100.0 and data["throttle_reasons_s"] == {"thermal": 25.0}
    assert data["min_clock_pct"] == 55.6 and data["max_temperature_c"] == 91 and data["throttled_now"]
    assert data["energy_j"] == 0.0 and not data["energy_estimated"]
    assert summary_lines(data)[0].startswith("GPU 0: throttled 100 % of 0:25 (thermal 100 %), SM clock at 56 %")
    verdict = verdicts(summary=data)[0]
    assert verdict.kind == THROTTLED and verdict.text.startswith("GPU throttled 100 % of the run (thermal)")


def test_a_power_capped_gpu_and_one_that_is_only_idle():
    capped = sample(scenario("power_cap")).gpus[0]
    assert clocks.reason_groups(capped.throttle_mask) == ["power cap"] and capped.sm_clock_pct == 75.8
    assert clocks.describe(capped) == "throttled: power cap, SM 1500/1980 MHz (76 %)"
    idle = sample(scenario("healthy", reasons=0x01, util=0, sm=210)).gpus[0]
    assert not idle.throttled and clocks.describe(idle) == "idle, SM 210/1980 MHz (11 %)"
    summary = GpuSummary(1)
    feed(summary, FakeNVML([scenario("healthy", reasons=0x01, util=0, sm=210)]), 4)
    assert summary.to_dict()["throttled_s"] == 0 and summary.to_dict()["min_clock_pct"] is None  # idle clocks


def test_throttling_is_counted_per_epoch():
    summary = GpuSummary(1)
    fake = FakeNVML([scenario("healthy")])
    feed(summary, fake, 5, start=0.0)
    fake.gpus[0] = scenario("power_cap")
    feed(summary, fake, 5, start=25.0)
    summary.mark_epoch(0)
    assert summary.to_dict()["last_epoch"]["throttled_pct"] == pytest.approx(100 * 25 / 45, abs=0.1)  # each interval counts as its closing sample
    verdict = verdicts(summary=summary.to_dict())[0]
    assert verdict.kind == THROTTLED and verdict.text.startswith("GPU throttled 56 % of the epoch (power cap)")


def test_rising_ecc_counts_notify_once_and_survive_a_counter_reset():
    fake = FakeNVML([scenario("ecc")])
    gpu = GpuSampler(nvml=fake).sample().gpus[0]
    assert gpu.ecc_enabled and gpu.ecc_volatile == {"corrected": 3, "uncorrected": 0}
    assert gpu.ecc_aggregate == {"corrected": 10, "uncorrected": 0}
    summary = GpuSummary(1)
    assert feed(summary, fake, 2) == []  # errors from before the run are not the run's
    fake.gpus[0]["ecc"] = {"volatile": [5, 2], "aggregate": [12, 2]}
    assert feed(summary, fake, 1, start=2000) == ["ecc"]
    fake.gpus[0]["ecc"] = {"volatile": [5, 3], "aggregate": [12, 3]}
    assert feed(summary, fake, 1, start=2005) == []  # once
    fake.gpus[0]["ecc"] = {"volatile": [1, 1], "aggregate": [13, 4]}  # the driver reloaded: volatile restarts
    feed(summary, fake, 1, start=2010)
    assert summary.to_dict()["ecc_new"] == {"corrected": 3, "uncorrected": 4}
    off = sample(scenario("healthy", ecc_mode=0)).gpus[0]
    assert off.ecc_enabled is False and off.ecc_volatile is None


def test_an_xid_event_from_nvml_and_from_the_kernel_log(tmp_path):
    fake = FakeNVML([scenario("healthy"), scenario("xid", 1, xids=[48, 79])])
    sampler = GpuSampler(nvml=fake)
    snap = sampler.sample()
    watcher = XidWatcher(fake, sampler.call)
    assert watcher.start({0: 0, 1: 1}, {g.index: g.pci_bus_id for g in snap.gpus}) == "nvml"
    events = watcher.poll()
    assert [(e.gpu, e.xid) for e in events] == [(1, 48), (1, 79)] and "fallen off the bus" in events[1].meaning
    assert watcher.poll() == []

    log = tmp_path / "kern.log"
    log.write_text("old line: NVRM: Xid (PCI:0000:19:00): 13, pid=1, old\n")
    fake = FakeNVML([scenario("healthy"), scenario("healthy", 1)], events=False)
    watcher = XidWatcher(fake, sampler.call, KernelLog(kmsg=str(tmp_path / "no-kmsg"), files=[str(log)]))
    assert watcher.start({0: 0, 1: 1}, {0: "00000000:18:00.0", 1: "00000000:19:00.0"}) == "kernel log"
    with open(log, "ab") as handle:
        handle.write(b"\xff\xfe garbage\nkernel: NVRM: Xid (PCI:0000:19:00): 31, pid=4242, name=python, MMU Fault\n"
                     b"kernel: NVRM: GPU 0000:18:00.0: GPU has fallen off the bus.\nkernel: NVRM: Xid (PCI:0000:1")
    events = watcher.poll()  # only what was written after the start; the torn last line waits
    assert [(e.gpu, e.xid, e.source) for e in events] == [(1, 31, "kernel log"), (0, 79, "kernel log")]
    with open(log, "a") as handle:
        handle.write("9:00): 43, pid=1\n")
    assert [(e.gpu, e.xid) for e in watcher.poll()] == [(1, 43)]
    assert parse_kernel_line("NVRM: Xid (PCI:0000:19:00): 999999, nonsense", {}) is None


def test_a_gpu_that_falls_off_the_bus_is_a_gpu_fault():
    fake = FakeNVML([scenario("healthy"), scenario("healthy", 1)])
    summary = GpuSummary(1, device_gpus=[0])
    feed(summary, fake, 2)
    fake.gpus[0]["lost"] = True
    news = feed(summary, fake, 2, start=2000)
    assert news == ["lost"] and summary.fault
    assert summary.to_dict()["lost"][0]["gpu"] == 0 and "fell off the bus" in summary.to_dict()["lost"][0]["error"]
    assert any("GPU 0 lost" in line for line in summary_lines(summary.to_dict()))


def _record(**facts):
    base = {"attempt": 1, "exit_code": 1, "exit_signal": None, "command": ["python", "train.py"], "name": "r",
            "gpu_fault": {"gpus": [0], "xids": [{"gpu": 0, "xid": 79, "meaning": "GPU has fallen off the bus"}],
                          "lost": [], "free_gpus": [1]}}
    base.update(facts)
    return base


def test_a_crash_after_an_xid_is_a_gpu_fault_moved_or_stopped():
    config = {"command": ["python", "-m", "yolotui.engine", "train"], "backend": "yolotui",
              "restart": {"max_attempts": 3}}
    moved = policy.decide(_record(), config, [])
    assert moved.failure_class == "gpu-fault" and moved.retry and "Xid 79 on GPU 0" in moved.message
    assert moved.changes["env"] == {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert moved.changes["args"] == {"--device": "0"} and "resume on GPU 1" in moved.remedy
    official = policy.decide(_record(), {**config, "backend": "official"}, [])
    assert official.changes["opt_yaml"] == {"device": "0"}
    for why, record, run_config in (
            ("no other free GPU", _record(gpu_fault={**_record()["gpu_fault"], "free_gpus": []}), config),
            ("restart.gpu_fault is 'stop'", _record(), {**config, "restart": {"max_attempts": 3, "gpu_fault": "stop"}}),
            ("several GPUs", _record(gpu_fault={**_record()["gpu_fault"], "gpus": [0, 1]}), config),
            ("attempt limit", _record(), {**config, "restart": {"max_attempts": 1}})):
        stopped = policy.decide(record, run_config, [])
        assert stopped.failure_class == "gpu-fault" and not stopped.retry and why in stopped.remedy
        assert "yolotui resume r --device N" in stopped.remedy
    oom = policy.decide(_record(), config, [{"type": "error", "kind": "oom", "message": "CUDA out of memory"}])
    assert oom.failure_class == "oom"  # a failure with its own class keeps it
    logged = policy.decide(_record(log_tail="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate"),
                           {**config, "backend": "exec"}, [])
    assert logged.failure_class == "oom"
    plain = policy.decide(_record(gpu_fault=None), config, [])
    assert plain.failure_class == "crash"


def test_a_hung_reading_is_skipped_and_never_blocks_the_caller():
    fake = FakeNVML([scenario("ecc", hang=["nvmlDeviceGetTotalEccErrors"]), scenario("thermal", 1)], hang_s=3.0)
    sampler = GpuSampler(nvml=fake)
    started = time.monotonic()
    snap = sampler.sample()
    assert time.monotonic() - started < 2.5  # one limit (1 s) and the quick readings, not the 3 s hang
    first, second = snap.gpus
    assert "nvmlDeviceGetTotalEccErrors" in first.skipped and first.ecc_volatile is None
    assert first.temperature_c == 64 and second.throttled and second.sm_clock_pct == 55.6  # the rest is read
    started = time.monotonic()
    again = sampler.sample()  # the stuck call is not repeated while it hangs
    assert time.monotonic() - started < 0.9 and again.gpus[0].skipped == ["nvmlDeviceGetTotalEccErrors"]
    assert again.gpus[0].pcie_gen == 5
    caller = TimedCaller(0.05)
    with pytest.raises(ReadingSkipped):
        caller.call(time.sleep, 0.5)
    with pytest.raises(ZeroDivisionError):  # a failing reading's own error reaches the caller
        TimedCaller().call(lambda: 1 / 0)


def test_nonsense_from_nvml_is_no_reading():
    gpu = sample(scenario("garbage")).gpus[0]
    assert gpu.temperature_c is None and gpu.memory_used_mb is None and gpu.utilization_pct is None
    assert gpu.power_w is None and gpu.sm_clock_mhz is None and gpu.sm_clock_pct is None
    assert gpu.throttle_mask is None and gpu.throttled is None and gpu.energy_j is None
    assert gpu.pcie_gen is None and gpu.pcie_width_max is None and gpu.ecc_enabled is None
    assert clocks.describe(gpu) == ""
    json.dumps(gpu.to_dict())
    summary = GpuSummary(1)
    summary.add({"ts": "soon", "gpus": "many"})
    summary.add({"ts": 5.0, "available": True, "gpus": [{"index": 0, "throttle_mask": "x", "temperature_c": 1e9,
                                                          "ecc_volatile": {"uncorrected": "2"}}, "junk"]})
    assert summary.to_dict()["max_temperature_c"] is None and summary_lines("garbage") == []


def test_the_status_field_is_type_checked():
    assert status_problem({"gpu_summary": None}) is None
    assert status_problem({"gpu_summary": [{"attempt": 1}]}) is None
    assert status_problem({"gpu_summary": {"attempt": 1}}) == "gpu_summary: expected a list of objects"


def test_slowness_for_commands_without_loop_timings():
    busy_little = {"samples": 50, "seconds": 600.0, "throttled_s": 0, "throttled_pct": 0.0,
                   "utilization_mean_pct": 35.0}
    assert verdicts(summary=busy_little)[0].kind == LOW_UTILISATION
    assert verdicts(summary={**busy_little, "utilization_mean_pct": 95.0}) == []  # nothing to say
    loop = {"data_wait_s": 6.2, "compute_s": 3.8, "workers": 8, "cache": "ram"}
    found = verdicts(loop, {**busy_little, "throttled_pct": 40.0, "throttled_s": 240.0,
                            "throttle_reasons_s": {"thermal": 240.0}}, cpus=8)
    assert [v.kind for v in found] == [DATA_BOUND, THROTTLED]
    assert found[0].text.startswith("data-bound: the GPU waited 62 % of the step for data")
    assert "faster storage" in found[0].text  # every CPU and the RAM cache already in use
    assert verdicts() == []


def test_gpu_json_and_text_show_throttling_clocks_and_ecc(tmp_path, cli_env, yolotui_cmd):
    state = tmp_path / "nvml.json"
    write_state(state, [scenario("thermal"), scenario("ecc", 1, ecc={"volatile": [3, 2], "aggregate": [10, 2]})])
    env = {**cli_env, "YOLOTUI_NVML_MODULE": FAKE, "FAKE_NVML_STATE": str(state)}
    done = subprocess.run([*yolotui_cmd, "gpu", "--json"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    first, second = json.loads(done.stdout)["gpus"]
    assert first["throttle_reasons"] == ["thermal (hardware)", "thermal (software)", "hardware slowdown"]
    assert first["sm_clock_pct"] == 55.6 and first["sm_clock_max_mhz"] == 1980 and first["pcie_width_max"] == 16
    assert second["ecc_volatile"] == {"corrected": 3, "uncorrected": 2} and second["energy_j"] == 5_000_000
    done = subprocess.run([*yolotui_cmd, "gpu"], capture_output=True, text=True, env=env, timeout=60)
    assert "throttled: thermal, SM 1100/1980 MHz (56 %)" in done.stdout
    assert "ECC on: volatile 3 corrected / 2 uncorrected" in done.stdout and "PCIe gen 5/5 x16/16" in done.stdout


def test_status_and_doctor_show_the_gpu_summary_and_why_it_is_slow(tmp_path, capsys):
    from yolotui.cli import main
    from yolotui.runs.events import EventWriter
    from yolotui.runs.status import RunStatus, write_status

    run_dir = tmp_path / "runs" / "hot"
    (run_dir / "weights").mkdir(parents=True)
    summary = GpuSummary(1, device_gpus=[0])
    feed(summary, FakeNVML([scenario("thermal", ecc={"volatile": [0, 0], "aggregate": [0, 0]})]), 3)
    feed(summary, FakeNVML([scenario("thermal", ecc={"volatile": [1, 2], "aggregate": [1, 2]})]), 1, start=2000,
         xids=[{"gpu": 0, "xid": 48, "meaning": "double-bit ECC error", "source": "nvml", "ts": 2000.0}])
    write_status(run_dir, RunStatus(name="hot", run_dir=str(run_dir), state="failed", attempt=1,
                                    failure_class="gpu-fault", message="exit code 1 after Xid 48 on GPU 0",
                                    gpu_summary=[summary.to_dict()]))
    EventWriter(run_dir / "events.jsonl", 1).emit("epoch", epoch=0, epochs=3, loop={
        "data_wait_s": 6.2, "compute_s": 3.8, "steps": 100, "workers": 2, "cache": None})
    assert main(["status", str(run_dir)]) == 0
    text = capsys.readouterr().out
    assert "gpu        GPU 0: throttled 100 % of 0:25 (thermal 100 %)" in text
    assert "new ECC errors: 1 corrected, 2 uncorrected" in text and "Xid 48 on GPU 0: double-bit ECC error" in text
    assert "speed      data-bound: the GPU waited 62 % of the step for data; try --" in text
    assert "GPU throttled 100 % of the run (thermal)" in text
    assert main(["status", str(run_dir), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["gpu_summary"][0]["xids"][0]["xid"] == 48 and data["gpu"]["verdicts"][0]["kind"] == DATA_BOUND
    main(["doctor", str(run_dir), "--no-env"])
    text = capsys.readouterr().out
    assert "failure   gpu-fault: exit code 1 after Xid 48" in text
    assert "gpu       GPU 0: throttled" in text and "speed     data-bound" in text


def test_nvml_that_loses_its_gpus_mid_run_counts_as_lost():
    class Gone(FakeNVML):
        def nvmlDeviceGetCount(self):
            from fake_nvml import GPU_IS_LOST, NVMLError

            raise NVMLError(GPU_IS_LOST)

    summary = GpuSummary(1, device_gpus=[0])
    feed(summary, FakeNVML([scenario("healthy")]), 2)
    snap = GpuSampler(nvml=Gone([scenario("healthy")])).sample()
    assert not snap.available and "lost" in snap.reason
    assert summary.add({**snap.to_dict(), "ts": 2000.0, "xids": []}) == ["lost"] and summary.fault
