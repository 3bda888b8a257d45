"""Theme files: parsed, registered beside Textual's, switched by key and --theme, remembered, shipped in the wheel."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from tui_fakes import FakeSampler, wait_until

from yolotui.errors import UserError
from yolotui.tui import themes
from yolotui.tui.app import YolotuiApp

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def test_three_shipped_themes_parse_and_differ():
    loaded, problems = themes.load_themes()
    assert problems == []
    names = [theme.name for theme in loaded]
    assert {"yolo-night", "yolo-paper", "yolo-phosphor"} <= set(names)
    assert len({theme.primary for theme in loaded}) == len(loaded)
    assert any(not theme.dark for theme in loaded), "one light theme"


@pytest.mark.parametrize("text, words", [
    ("name: x\nprimary: [1, 2\n", ["bad.yaml", "not valid YAML"]),
    ("- a list\n", ["bad.yaml", "mapping"]),
    ("name: x\nprimary: '#123456'\ncolour: red\n", ["bad.yaml", "unknown field 'colour'"]),
    ("primary: '#123456'\n", ["bad.yaml", "'name' is required"]),
    ("name: x\nprimary: 'not-a-colour'\n", ["bad.yaml"]),
])
def test_bad_theme_file_is_a_clear_error(text, words):
    with pytest.raises(UserError) as caught:
        themes.parse_theme(text, "bad.yaml")
    for word in words:
        assert word in str(caught.value)


async def test_key_switches_theme_and_the_choice_is_remembered():
    app = YolotuiApp(sampler=FakeSampler(), gpu_interval=None)
    assert app.theme == "yolo-night"  # the default on a first start
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.home.loaded)
        await pilot.press("t")
        assert app.theme == "yolo-paper"
        await pilot.pause()
    assert themes.load_settings()["theme"] == "yolo-paper"
    assert YolotuiApp(sampler=FakeSampler()).theme == "yolo-paper"  # next start
    assert YolotuiApp(theme="yolo-phosphor", sampler=FakeSampler()).theme == "yolo-phosphor"
    assert YolotuiApp(theme="textual-dark", sampler=FakeSampler()).theme == "textual-dark"  # Textual's own too


async def test_command_palette_lists_the_actions():
    app = YolotuiApp(sampler=FakeSampler(), gpu_interval=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.home.loaded)
        titles = [command.title for command in app.get_system_commands(app.screen)]
    for title in ("Theme", "Next theme", "Help: keys", "Runs table", "Reload runs", "Filter runs",
                  "Sort runs by name", "Quit"):
        assert title in titles


def test_unknown_theme_is_a_one_line_cli_error(cli_env, yolotui_cmd):
    result = subprocess.run([*yolotui_cmd, "--theme", "no-such-theme"], env=cli_env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "unknown theme 'no-such-theme'" in result.stderr and "yolo-night" in result.stderr


def test_attach_unknown_run_is_a_one_line_cli_error(cli_env, yolotui_cmd):
    result = subprocess.run([*yolotui_cmd, "attach", "no-such-run"], env=cli_env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2
    assert "no-such-run" in result.stderr and result.stderr.strip().count("\n") == 0


def test_wheel_ships_the_theme_files(tmp_path):
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "--no-build-isolation",
                             "-w", str(tmp_path), "-q"], capture_output=True, text=True, timeout=240,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    wheel = next(tmp_path.glob("yolotui-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "yolotui/tui/app.tcss" in names
    shipped = {Path(name).name for name in names if name.startswith("yolotui/themes/")}
    assert {"yolo-night.yaml", "yolo-paper.yaml", "yolo-phosphor.yaml"} <= shipped
