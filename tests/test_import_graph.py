"""yolotui's import graph: no circles, no import that climbs a floor (FLOORS), and the TUI and the jobs layer never
import the CLI adapters or torch. docs/architecture.md, "Layers" draws the same floors (tests/test_architecture_doc.py
keeps them in step); the size caps are tests/test_design_caps.py.

The graph is read from the source (ast), so it covers imports inside functions too: a circle hidden in a
function body is still a circle for the next maintainer. Two graphs are checked: modules, and the top-level
packages under yolotui (runs, health, jobs, tui ...), where an edge is any import from one into the other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import yolotui

ROOT = Path(yolotui.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The yolotui modules `name` imports anywhere in its source (relative imports resolved)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return {m for m in found if m in known and m != name}


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {name: _imports(name, path, known) for name, path in known.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _package(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2])


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_import_circles():
    assert _cycles(_graph()) == []


def test_no_package_import_circles():
    packages: dict[str, set[str]] = {}
    for module, targets in _graph().items():
        source = _package(module)
        packages.setdefault(source, set()).update(
            _package(t) for t in targets if _package(t) != source and _package(t) != "yolotui")
    assert _cycles(packages) == []


def test_tui_and_jobs_never_import_the_cli_adapters():
    offenders = sorted(
        f"{module} -> {target}"
        for module, targets in _graph().items()
        if module.startswith(("yolotui.tui", "yolotui.jobs", "yolotui.backends"))
        for target in targets
        if target == "yolotui.commands" or target.startswith("yolotui.commands.") or target == "yolotui.cli"
    )
    assert offenders == []
    assert "yolotui.jobs.resume" in _graph()  # the walk sees the jobs layer at all


def test_jobs_and_backends_never_import_torch():
    import subprocess
    import sys

    light = ("yolotui.jobs", "yolotui.backends", "yolotui.runs", "yolotui.supervisor", "yolotui.placement",
             "yolotui.notify", "yolotui.health", "yolotui.telemetry", "yolotui.mirror", "yolotui.fleet")
    modules = sorted(m for m in _modules() if m.startswith(light) and not m.endswith(".weights"))
    code = ("import importlib, sys\n"
            f"for name in {modules!r}: importlib.import_module(name)\n"
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith(('torch.', 'yolotui.engine', "
            "'yolotui.tui', 'textual'))))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=ROOT.parent)
    assert done.returncode == 0, done.stderr
    assert len(modules) >= 10 and done.stdout.strip() == "[]"


# The floors of the house, lowest first: a package may import its own floor and those below, never above.
FLOORS = [
    {"yolotui", "yolotui.errors", "yolotui.formatting", "yolotui.procs", "yolotui.logtext", "yolotui.devices",
     "yolotui.failure_text", "yolotui.logconfig",
     "yolotui.safe_yaml", "yolotui.telemetry"},
    {"yolotui.runs"},                                      # the run-folder contract: the only hallway
    {"yolotui.usersettings", "yolotui.config", "yolotui.configs", "yolotui.datasets"},
    {"yolotui.notify", "yolotui.placement", "yolotui.mirror", "yolotui.fleet"},  # where a supervisor starts;
    # notifications; the mirror; the fleet (other machines over ssh)
    {"yolotui.health"},                                   # diagnosis without torch
    {"yolotui.backends"},                                 # one package per kind of trainer
    {"yolotui.supervisor"},                               # asks the run's backend for its remedies
    {"yolotui.jobs", "yolotui.engine"},
    {"yolotui.tui"},
    {"yolotui.commands", "yolotui.cli", "yolotui.__main__"},
]


def _floor(module: str) -> int:
    package = _package(module)
    for number, members in enumerate(FLOORS):
        if package in members or module in members:
            return number
    raise AssertionError(f"{module}: on no floor of FLOORS; add its package there")


def test_imports_never_climb_a_floor():
    climbs = sorted(f"{module} -> {target}" for module, targets in _graph().items() for target in targets
                    if _floor(target) > _floor(module))
    assert climbs == []


def test_a_backends_torch_side_is_imported_by_the_engine_and_commands_only():
    """backends/*/weights.py read checkpoints with torch; the job layer and the TUI never reach them."""
    torch_side = {m for m in _modules() if m.startswith("yolotui.backends.") and m.endswith(".weights")}
    assert "yolotui.backends.official.weights" in torch_side
    offenders = sorted(f"{module} -> {target}" for module, targets in _graph().items() for target in targets
                       if target in torch_side and not module.startswith(("yolotui.engine", "yolotui.commands"))
                       and module not in torch_side)
    assert offenders == []
