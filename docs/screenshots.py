"""Write the documentation's pictures, docs/images/*.svg, from the terminal UI itself.

    python docs/screenshots.py            # all of them
    python docs/screenshots.py dashboard  # one (home, dashboard, resume-wizard, gpu-panel)

Each picture is the real app (Textual's run_test, then export_screenshot) on fake data: run folders written per
the run-folder contract by tests/tui_fixtures.py, a fixed clock, a scripted GPU (tests/tui_fakes.py,
tests/fake_nvml.py) and a fake diagnosis for the resume wizard (tests/wizard_kit.py). No GPU, no torch, no
training; the same input gives the same SVG, so rerun it after a change to the screens and commit the result.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs" / "images"
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


async def settle(pilot, ready, what: str) -> None:
    """Wait until `ready()` (the screen has its data), then until every widget has drawn it."""
    deadline = time.monotonic() + 60
    while not ready():
        if time.monotonic() > deadline:
            raise SystemExit(f"screenshots: the {what} never finished loading")
        await pilot.pause(0.05)
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


OUT = {"dir": IMAGES}  # where shoot() writes; main's --out changes it


async def shoot(app, size: tuple[int, int], ready, name: str, title: str) -> Path:
    """Run `app` headless at `size`, wait for `ready(app)`, and write <out>/<name>.svg."""
    async with app.run_test(size=size) as pilot:
        await settle(pilot, lambda: ready(pilot.app), name)
        svg = pilot.app.export_screenshot(title=title)
    folder = Path(OUT["dir"])
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.svg"
    path.write_text(svg, encoding="utf-8")
    return path


def fleet_of_runs(root: Path) -> dict:
    """A few runs in every state the home screen shows, with plausible names."""
    from tui_fixtures import FIXED_NOW, make_run, metrics_for

    from yolotui.runs.layout import TRAIN_LOG

    made = {
        "running": make_run(root, "yolov9-s-pets", state="running", epochs=50, done_epochs=14, hold_lock=True,
                            batch_in_progress=12, started=FIXED_NOW - 2400, attempt=2, attempts=[
                                {"attempt": 1, "exit_code": 1, "failure_class": "oom",
                                 "remedy": "batch 32 -> 16, accumulation x2"}, {"attempt": 2}]),
        "finished": make_run(root, "gelan-c-coco", state="finished", epochs=12, done_epochs=12,
                             started=FIXED_NOW - 86_000),
        "failed": make_run(root, "shapes-bad-labels", state="failed", epochs=30, done_epochs=1,
                           failure_class="data", message="labels/train/img_17.txt line 3: class 7 outside [0, 5)",
                           started=FIXED_NOW - 5400, checkpoint=None),
        "interrupted": make_run(root, "yolov9-c-spot", state="running", epochs=300, done_epochs=9,
                                started=FIXED_NOW - 30_000),
        "stopped": make_run(root, "yolov9-t-demo", state="stopped", epochs=50, done_epochs=6,
                            started=FIXED_NOW - 9000),
    }
    log = ["===== attempt 2 ====="]
    for epoch in range(14):
        m = metrics_for(epoch)
        log.append(f"epoch {epoch + 1}/50  box {m['box']:.3f}  cls {m['cls']:.3f}  dfl {m['dfl']:.3f}  "
                   f"P {m['P']:.3f}  R {m['R']:.3f}  mAP50 {m['mAP50']:.3f}  mAP50-95 {m['mAP50-95']:.3f}")
    (made["running"].path / TRAIN_LOG).write_text("\n".join(log) + "\n")
    return made


def use_house_theme(app) -> None:
    """Give a bare test app the TUI's default theme, so every picture has the same colours."""
    from yolotui.tui import themes

    for theme in themes.load_themes()[0]:
        app.register_theme(theme)
    app.theme = themes.DEFAULT_THEME


def main_app(run_dir=None):
    """The real app on a fixed clock with a fake GPU, its theme not saved."""
    from tui_fakes import FakeSampler
    from tui_fixtures import FIXED_NOW

    from yolotui.tui.app import YolotuiApp

    return YolotuiApp(run_dir=run_dir, theme="yolo-night", sampler=FakeSampler(), clock=lambda: FIXED_NOW,
                      gpu_interval=None, remember_theme=False)


async def home(work: Path) -> Path:
    """The home screen: every run, live."""
    runs = fleet_of_runs(work / "runs")
    try:
        return await shoot(main_app(), (120, 30), lambda app: app.home is not None and app.home.load_count >= 2,
                           "home", "yolotui")
    finally:
        for run in runs.values():
            run.release()


async def dashboard(work: Path) -> Path:
    """A live run's dashboard."""
    from yolotui.tui.screens.dashboard import DashboardScreen

    runs = fleet_of_runs(work / "runs")
    try:
        return await shoot(main_app(runs["running"].path), (120, 40),
                           lambda app: isinstance(app.screen, DashboardScreen) and app.screen.settled,
                           "dashboard", "yolotui attach yolov9-s-pets")
    finally:
        for run in runs.values():
            run.release()


async def resume_wizard(work: Path) -> Path:
    """The resume wizard after an out-of-memory failure (a smaller batch pre-selected)."""
    from textual.widgets import Input
    from wizard_kit import CaptureLauncher, HostApp, fake_diagnosis, make_plain_run

    from yolotui.tui.screens.wizard_resume import ResumeWizard

    run_dir = make_plain_run(work / "runs" / "yolov9-s-pets")
    class ThemedHost(HostApp):
        def on_mount(self) -> None:
            use_house_theme(self)
            super().on_mount()

    app = ThemedHost(lambda: ResumeWizard(run_dir, CaptureLauncher(), diagnose=lambda p: fake_diagnosis(p, "oom")))

    def ready(app) -> bool:
        if app.wizard is None or app.wizard.facts is None:
            return False
        for box in app.screen.query(Input):
            box.cursor_blink = False
        return True

    return await shoot(app, (100, 32), ready, "resume-wizard", "yolotui: resume wizard")


async def gpu_panel(work: Path) -> Path:
    """The dashboard's GPU panel of a thermally throttled GPU, with the run's GPU summary."""
    from fake_nvml import FakeNVML, scenario
    from textual.app import App, ComposeResult
    from tui_fakes import FakeHost

    from yolotui.telemetry.gpu import GpuSampler
    from yolotui.telemetry.gpu_summary import GpuSummary
    from yolotui.tui.widgets.panels import GpuPanel

    gpu = scenario("thermal")
    fake = FakeNVML([gpu])
    sampler = GpuSampler(nvml=fake)
    summary = GpuSummary(1, device_gpus=[0])
    for i in range(3):
        data = sampler.sample().to_dict()
        data["ts"], data["xids"] = 1000.0 + 5 * i, []
        summary.add(data)
    snapshot = sampler.sample()
    snapshot.host, snapshot.ts = FakeHost(), 1.0

    class PanelApp(App):
        CSS = "GpuPanel { width: 44; height: auto; padding: 0 1; }"
        painted = False

        def compose(self) -> ComposeResult:
            yield GpuPanel(id="gpu")

        def on_mount(self) -> None:
            use_house_theme(self)
            self.query_one(GpuPanel).show([snapshot], set(), summary.to_dict(), None)
            self.painted = True

    return await shoot(PanelApp(), (46, 19), lambda app: app.painted, "gpu-panel", "yolotui: GPU panel")


SHOTS = {"home": home, "dashboard": dashboard, "resume-wizard": resume_wizard, "gpu-panel": gpu_panel}


def main(argv: list[str] | None = None) -> int:
    """Write the pictures named (all by default) into docs/images/."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"pictures to write: {', '.join(SHOTS)} (default: all)")
    parser.add_argument("--out", type=Path, default=IMAGES, help="folder to write into (default docs/images)")
    options = parser.parse_args(argv)
    names, OUT["dir"] = options.names or list(SHOTS), options.out.resolve()
    unknown = [name for name in names if name not in SHOTS]
    if unknown:
        parser.error(f"no picture named {unknown[0]}; choose from {', '.join(SHOTS)}")
    saved = {key: os.environ.get(key) for key in ("TZ", "YOLOTUI_HOME")}
    os.environ["TZ"] = "UTC"
    time.tzset()
    try:
        shoot_all(names)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        time.tzset()
    return 0


def shoot_all(names: list[str]) -> None:
    """Each picture in a temporary working folder and state folder of its own."""
    for name in names:
        with tempfile.TemporaryDirectory(prefix="yolotui-shots-") as work:
            os.environ["YOLOTUI_HOME"] = str(Path(work) / "home")  # a run index of its own, never yours
            here = os.getcwd()
            os.chdir(work)
            try:
                path = asyncio.run(SHOTS[name](Path(work)))
            finally:
                os.chdir(here)
        print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
