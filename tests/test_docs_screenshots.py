"""docs/screenshots.py draws the documentation's pictures from the real TUI, on fake runs, the same every time."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_script():
    spec = importlib.util.spec_from_file_location("docs_screenshots", ROOT / "docs" / "screenshots.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def text_of(svg: str) -> str:
    """The terminal text of an exported screenshot (Rich writes spaces as &#160;)."""
    return svg.replace("&#160;", " ")


def test_pictures_show_the_screens_and_are_reproducible(tmp_path):
    script = load_script()
    home_before = os.environ.get("YOLOTUI_HOME")
    assert script.main(["home", "resume-wizard", "--out", str(tmp_path / "a")]) == 0
    assert os.environ.get("YOLOTUI_HOME") == home_before  # the caller's state folder is given back
    home = text_of((tmp_path / "a" / "home.svg").read_text())
    for name in ("yolov9-s-pets", "gelan-c-coco", "interrupted", "finished"):
        assert name in home
    wizard = text_of((tmp_path / "a" / "resume-wizard.svg").read_text())
    assert "smaller" in wizard and "--batch-size" in wizard
    assert script.main(["home", "--out", str(tmp_path / "b")]) == 0
    assert (tmp_path / "b" / "home.svg").read_text() == (tmp_path / "a" / "home.svg").read_text()


def test_committed_pictures_exist_for_every_shot():
    script = load_script()
    for name in script.SHOTS:
        path = ROOT / "docs" / "images" / f"{name}.svg"
        assert path.read_text(encoding="utf-8").lstrip().startswith("<svg"), path
