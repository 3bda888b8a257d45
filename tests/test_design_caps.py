"""Caps that measure design (docs/architecture.md, "Layers"): modules under MAX_MODULE_LINES lines, functions under
MAX_FUNCTION_LINES (measured with ast, decorators aside), and every package's __init__ docstring naming each of its
modules (`name.py`) and subpackages (`name/`) and nothing that is not there, so a new reader can summarise any
package from its docstring.

ALLOWLIST holds what exceeds a cap today, with its current length: it may only shrink. The test fails when a
listed one grows, when a new one appears, and when a listed one is back under its cap (delete its entry).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import yolotui

ROOT = Path(yolotui.__file__).resolve().parent
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 80

# "path" (a module) or "path:Qualified.name" (a function) -> its length today.
ALLOWLIST: dict[str, int] = {
    "yolotui/backends/ultralytics/shim.py:run_training": 82,
}


def _relative(path: Path) -> str:
    return str(path.relative_to(ROOT.parent))


def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, int]]:
    """(qualified name, lines) of every function and method in `tree`, nested ones included."""
    found = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + node.name
            found.append((name, node.end_lineno - node.lineno + 1))
            found += _functions(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            found += _functions(node, prefix + node.name + ".")
    return found


def oversized(root: Path = ROOT) -> dict[str, int]:
    """Every module over MAX_MODULE_LINES and function over MAX_FUNCTION_LINES under `root`, with its length."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            found[_relative(path)] = lines
        for name, length in _functions(ast.parse(text)):
            if length > MAX_FUNCTION_LINES:
                found[f"{_relative(path)}:{name}"] = length
    return found


def test_the_measure_counts_functions_and_methods(tmp_path):
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "m.py").write_text(f"class A:\n    def long(self):\n{body}\n\n\ndef short():\n    return 1\n")
    assert _functions(ast.parse((tmp_path / "m.py").read_text())) == [("A.long", MAX_FUNCTION_LINES + 1),
                                                                      ("short", 2)]


def test_no_module_or_function_outgrows_its_cap():
    found = oversized()
    new = {key: length for key, length in found.items() if key not in ALLOWLIST}
    grown = {key: (ALLOWLIST[key], length) for key, length in found.items()
             if key in ALLOWLIST and length > ALLOWLIST[key]}
    assert new == {}, "split these into well-named parts"
    assert grown == {}, "an allowlisted module or function grew: (allowed, now)"


def test_the_allowlist_only_holds_what_still_exceeds_a_cap():
    found = oversized()
    assert sorted(key for key in ALLOWLIST if key not in found) == [], "under its cap now: remove it from ALLOWLIST"


def _without_code_spans(text: str) -> str:
    """`name.py` in backticks is a file of another project or a command, not a module of this package."""
    return re.sub(r"`[^`]*`", "", text)


def named_in(doc: str) -> tuple[set[str], set[str]]:
    """(modules named `x.py`, folders named `x/`) in a docstring, paths into other packages aside."""
    text = _without_code_spans(doc)
    modules = set(re.findall(r"(?<![\w/.])([A-Za-z_]\w*)\.py\b", text))
    folders = set(re.findall(r"(?<![\w/.:])([A-Za-z_]\w*)/(?![\w/])", text))
    return modules, folders


def test_named_in_reads_modules_and_folders():
    doc = "a.py (x), b/ and c.py; see yolotui/runs/d.py, `e.py`, logout/logind, s3://bucket"
    assert named_in(doc) == ({"a", "c"}, {"b"})


def _packages() -> list[Path]:
    return sorted([ROOT, *(p for p in ROOT.rglob("*") if p.is_dir() and (p / "__init__.py").is_file())])


def test_every_package_docstring_names_what_is_there_and_nothing_else():
    problems = {}
    for package in _packages():
        doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""
        modules, folders = named_in(doc)
        present = {p.stem for p in package.glob("*.py") if p.name != "__init__.py"}
        subpackages = {p.name for p in package.iterdir() if (p / "__init__.py").is_file()}
        missing = sorted(present - modules) + sorted(f"{s}/" for s in subpackages - folders)
        absent = sorted(f"{m}.py" for m in modules - present) \
            + sorted(f"{f}/" for f in folders if not (package / f).is_dir())
        if missing or absent:
            problems[_relative(package)] = {"not named": missing, "named but not there": absent}
    assert len(_packages()) > 20
    assert problems == {}
