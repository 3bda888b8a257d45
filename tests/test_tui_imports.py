"""The TUI never imports torch: mount every screen in a fresh interpreter and look at sys.modules."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    import asyncio, sys, tempfile
    from pathlib import Path
    sys.path.insert(0, "tests")
    from tui_fakes import FakeSampler, wait_until
    from tui_fixtures import FIXED_NOW, standard_runs
    from yolotui.tui.app import YolotuiApp
    from yolotui.tui.screens.dashboard import DashboardScreen
    from yolotui.tui.screens.help import HelpScreen

    runs = standard_runs(Path(tempfile.mkdtemp()))
    seen = []

    async def main():
        # The real sampler path too (telemetry or its CPU-only stand-in), not only the fake.
        for sampler in (FakeSampler(), None):
            app = YolotuiApp(sampler=sampler, clock=lambda: FIXED_NOW, gpu_interval=None, remember_theme=False)
            async with app.run_test(size=(80, 24)) as pilot:
                await wait_until(pilot, lambda: app.home.loaded)
                seen.append(type(app.screen).__name__)
                for run in runs.values():
                    app.open_run(run.path)
                    await wait_until(pilot, lambda: isinstance(app.screen, DashboardScreen)
                                     and app.screen.settled)
                    seen.append(type(app.screen).__name__)
                await pilot.press("question_mark")
                await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
                seen.append(type(app.screen).__name__)
                await pilot.press("escape")
                app.action_command_palette()
                await pilot.pause(0.2)
                seen.append(type(app.screen).__name__)

    asyncio.run(main())
    print(",".join(sorted(set(seen))))
    print("TORCH" if "torch" in sys.modules or "torchvision" in sys.modules else "NO-TORCH")
    print("ENGINE" if any(m.startswith("yolotui.engine") for m in sys.modules) else "NO-ENGINE")
''')


def test_every_screen_mounts_without_torch(cli_env, tmp_path):
    cli_env["YOLOTUI_HOME"] = str(tmp_path / "home")
    result = subprocess.run([sys.executable, "-c", SCRIPT], env=cli_env, capture_output=True, text=True,
                            timeout=120, cwd=cli_env["PYTHONPATH"].split(":")[0])
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.strip().splitlines()
    assert lines[-3] == "CommandPalette,DashboardScreen,HelpScreen,HomeScreen"
    assert lines[-2] == "NO-TORCH"
    assert lines[-1] == "NO-ENGINE"


def test_cli_tui_and_attach_import_no_torch(cli_env):
    code = ("import sys; import yolotui.commands.tui, yolotui.commands.attach, yolotui.tui.app; "
            "print('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], env=cli_env, capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "False", result.stderr
