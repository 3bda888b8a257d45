"""Snapshots of the dashboard's GPU panel in each state of the scripted GPU (tests/fake_nvml.py): healthy,
thermally throttled, power-capped, rising ECC errors, an Xid, fallen off the bus, and a data-bound run.

Update with `pytest tests/test_tui_gpu_panel.py --snapshot-update` after an intended change.
"""

from __future__ import annotations

import pytest
from fake_nvml import FakeNVML, scenario
from textual.app import App, ComposeResult
from tui_fakes import FakeHost

from yolotui.telemetry.gpu import GpuSampler
from yolotui.telemetry.gpu_summary import GpuSummary
from yolotui.tui.widgets.panels import GpuPanel


def _state(name: str):
    """(snapshot, run summary, loop timings) of one state."""
    gpu = {"ecc": scenario("ecc", ecc={"volatile": [3, 2], "aggregate": [10, 2]}),
           "xid": scenario("healthy"), "data": scenario("healthy", util=41)}.get(name) or scenario(name)
    fake = FakeNVML([gpu])
    sampler = GpuSampler(nvml=fake)
    summary = GpuSummary(1, device_gpus=[0])
    before = {"ecc": scenario("ecc"), "lost": scenario("healthy")}.get(name, gpu)
    for i, state in enumerate([before, before, gpu]):
        fake.gpus[0] = state
        data = sampler.sample().to_dict()
        data["ts"] = 1000.0 + 5 * i
        data["xids"] = [{"gpu": 0, "xid": 48, "meaning": "double-bit ECC error", "source": "nvml", "ts": 1010.0}] \
            if name == "xid" and i == 2 else []
        summary.add(data)
    fake.gpus[0] = gpu
    snapshot = sampler.sample()
    snapshot.host = FakeHost()
    snapshot.ts = 1.0
    loop = {"data_wait_s": 6.2, "compute_s": 3.8, "steps": 100, "workers": 16, "cache": "ram"} \
        if name == "data" else None
    return snapshot, summary.to_dict(), loop


class PanelApp(App):
    """Only the GPU panel, at the width it has on a 120-column dashboard."""

    CSS = "GpuPanel { width: 38; height: auto; padding: 0 1; }"

    def compose(self) -> ComposeResult:
        yield GpuPanel(id="gpu")


STATES = ["healthy", "thermal", "power_cap", "ecc", "xid", "lost", "data"]


@pytest.mark.parametrize("state", STATES)
def test_gpu_panel_snapshot(snap_compare, state):
    snapshot, summary, loop = _state(state)

    async def paint(pilot) -> None:
        await pilot.pause()
        pilot.app.query_one(GpuPanel).show([snapshot], set(), summary, loop)
        await pilot.pause()

    assert snap_compare(PanelApp(), terminal_size=(40, 22), run_before=paint)


def test_gpu_panel_words_in_each_state():
    from tui_fakes import rendered

    expected = {
        "healthy": ["not throttled\n SM 1980/1980 MHz (100 %)", "ECC no errors", "run\n not throttled"],
        "thermal": ["throttled: thermal\n SM 1100/1980 MHz (56 %)", "GPU throttled 100 % of the run\n (thermal), SM "
                    "clock at 56 %", "min clock 56 %, peak 91°C"],
        "power_cap": ["throttled: power cap", "SM 1500/1980 MHz (76 %)"],
        "ecc": ["ECC 2 uncorrected!", "2 new uncorrected ECC error(s)"],
        "xid": ["Xid 48 GPU0: double-bit ECC error"],
        "lost": ["GPU0 \n GPU fell off the bus (lost)", "GPU0 lost: GPU fell off the bus"],
        "data": ["data-bound: the GPU waited 62 %"],
    }

    async def check() -> None:
        for state, words in expected.items():
            app = PanelApp()
            async with app.run_test(size=(40, 30)) as pilot:
                snapshot, summary, loop = _state(state)
                panel = app.query_one(GpuPanel)
                panel.show([snapshot], set(), summary, loop)
                await pilot.pause()
                text = rendered(panel)
                for word in words:
                    assert word in text, (state, word, text)

    import asyncio

    asyncio.run(check())


def test_the_dashboard_shows_the_runs_gpu_summary_and_verdict(tmp_path):
    """The dashboard feeds the panel the summary in status.json and the last epoch's loop timings."""
    import asyncio

    from tui_fakes import FakeSampler, rendered, wait_until

    from yolotui.runs.events import EventWriter
    from yolotui.runs.status import RunStatus, write_status
    from yolotui.tui.app import YolotuiApp
    from yolotui.tui.screens.dashboard import DashboardScreen

    _, summary, _ = _state("thermal")
    run_dir = tmp_path / "runs" / "hot"
    (run_dir / "weights").mkdir(parents=True)
    write_status(run_dir, RunStatus(name="hot", run_dir=str(run_dir), state="failed", attempt=1,
                                    gpu_summary=[{"attempt": 0, "samples": 1, "throttled_pct": 0.0}, summary]))
    EventWriter(run_dir / "events.jsonl", 1).emit("epoch", epoch=0, epochs=3, loop={
        "data_wait_s": 6.2, "compute_s": 3.8, "steps": 100, "workers": 2, "cache": None})

    async def check() -> None:
        app = YolotuiApp(run_dir=run_dir, sampler=FakeSampler(), clock=lambda: 1.0, gpu_interval=None,
                         remember_theme=False)
        async with app.run_test(size=(120, 60)) as pilot:
            assert await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.settled)
            text = rendered(app.screen.query_one(GpuPanel))
            assert "data-bound: the GPU waited 62 %" in text and "GPU throttled 100 % of the run" in text

    asyncio.run(check())
