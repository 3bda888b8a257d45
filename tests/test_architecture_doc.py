"""docs/architecture.md stays true to the code: its Layers table is tests/test_import_graph.py's FLOORS (every
top-level module and package of yolotui on the same floor in both, and every subpackage named), and every section
the code cites by name exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_import_graph import FLOORS

import yolotui

ROOT = Path(yolotui.__file__).resolve().parent
DOC = ROOT.parent / "docs" / "architecture.md"


def _section(text: str, title: str) -> str:
    """The body of the `## title` section of `text` (up to the next `## ` heading)."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"docs/architecture.md has no '## {title}' section"
    return match.group(1)


def _module_of(name: str) -> str:
    """`runs/` -> yolotui.runs, `cli.py` -> yolotui.cli, `__init__.py` -> yolotui."""
    if name == "__init__.py":
        return "yolotui"
    return "yolotui." + name.rstrip("/").removesuffix(".py").replace("/", ".")


def doc_floors(text: str) -> dict[int, set[str]]:
    """Floor number -> the modules and packages the Layers table puts there (its second column)."""
    floors: dict[int, set[str]] = {}
    for line in _section(text, "Layers").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].isdigit():
            number = int(cells[0])
            assert number not in floors, f"floor {number} has two rows in the Layers table"
            floors[number] = {_module_of(n) for n in re.findall(r"`([^`]+)`", cells[1])}
    return floors


def _top_level() -> set[str]:
    modules = {f"yolotui.{p.stem}" for p in ROOT.glob("*.py") if p.name != "__init__.py"}
    packages = {f"yolotui.{p.name}" for p in ROOT.iterdir() if (p / "__init__.py").is_file()}
    return {"yolotui"} | modules | packages


def test_the_layers_table_parser_reads_a_table():
    text = ("## Layers\n\n| floor | packages and modules | what |\n| --- | --- | --- |\n"
            "| 1 | `runs/` | the hallway |\n| 0 | `__init__.py`, `errors.py` | ground |\n\n## Next\n| 5 | `x/` | |\n")
    assert doc_floors(text) == {1: {"yolotui.runs"}, 0: {"yolotui", "yolotui.errors"}}


def test_the_layers_table_is_the_import_graphs_floors():
    floors = doc_floors(DOC.read_text(encoding="utf-8"))
    assert sorted(floors) == list(range(len(FLOORS))), "one row per floor of FLOORS, numbered from the ground (0)"
    differences = {number: {"only in the doc": sorted(floors[number] - FLOORS[number]),
                            "only in FLOORS": sorted(FLOORS[number] - floors[number])}
                   for number in floors if floors[number] != FLOORS[number]}
    assert differences == {}


def test_every_top_level_module_and_package_is_on_a_floor():
    on_floors = set().union(*FLOORS)
    assert sorted(_top_level() - on_floors) == []
    assert sorted(on_floors - _top_level()) == []  # no floor names a module that is gone


def test_every_subpackage_is_named_in_the_layers_section():
    layers = _section(DOC.read_text(encoding="utf-8"), "Layers")
    subpackages = sorted(str(p.relative_to(ROOT)) + "/" for p in ROOT.glob("*/*") if (p / "__init__.py").is_file())
    assert "backends/ultralytics/" in subpackages
    assert [name for name in subpackages if f"`{name}`" not in layers] == []


def _cited_sections() -> list[tuple[str, str]]:
    cited = []
    for path in [*ROOT.rglob("*.py"), *(ROOT.parent / "tests").glob("*.py"), *(ROOT.parent / "bench").glob("*.py")]:
        for title in re.findall(r'docs/architecture\.md, "([^"]+)"', path.read_text(encoding="utf-8")):
            cited.append((str(path.relative_to(ROOT.parent)), title))
    return cited


def test_every_cited_section_exists():
    headings = set(re.findall(r"^#{2,4} (.+)$", DOC.read_text(encoding="utf-8"), re.M))
    cited = _cited_sections()
    assert len(cited) >= 5
    assert [(where, title) for where, title in cited if title not in headings] == []


@pytest.mark.parametrize("folder", ["yolotui", "tests", "bench"])
def test_no_code_cites_design_md(folder):
    base = ROOT.parent / folder
    offenders = [str(p.relative_to(ROOT.parent)) for p in base.rglob("*.py")
                 if "DESIGN" + ".md" in p.read_text(encoding="utf-8")]
    assert offenders == []
