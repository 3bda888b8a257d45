"""Backends: the kinds of trainer yolotui can run.

base.py is the interface (Backend, Capabilities, CommandRequest, LaunchSpec, RunOutputs, the remedy names;
docs/architecture.md, "Backend interface"). One package per backend: engine/ (yolotui's own trainer), exec/
(any command), official/ (the official YOLOv9 repository), ultralytics/ (ultralytics' trainer).

`get_backend(name)` returns the backend run.yaml's `backend` names. Backends are found through the
`yolotui.backends` entry-point group ("name = module:Class"): yolotui declares its own there (pyproject.toml),
and a separate installable package adds a trainer the same way (docs/backends.md). BUILTIN holds the shipped
ones too, for an install whose metadata does not list them (a source checkout on PYTHONPATH); a package may
not replace a shipped name. Classes are imported only when asked for, so `yolotui ls` never pays for them.

shimkit.py is what the trainer shims (official/shim.py, ultralytics/shim.py) share, loaded by path in the
trainer's interpreter: messages, yolotui's events writer (runs/events.py), atomic writes, failure classes.
"""

from __future__ import annotations

import importlib

from yolotui.backends.base import Backend
from yolotui.errors import UserError

ENGINE = "yolotui"  # run.yaml's name for yolotui's own trainer (also reachable as "engine")
EXEC = "exec"
GROUP = "yolotui.backends"

BUILTIN: dict[str, str] = {
    ENGINE: "yolotui.backends.engine.backend:EngineBackend",
    "engine": "yolotui.backends.engine.backend:EngineBackend",
    EXEC: "yolotui.backends.exec.backend:ExecBackend",
    "official": "yolotui.backends.official:OfficialBackend",
    "ultralytics": "yolotui.backends.ultralytics:UltralyticsBackend",
}
# name -> "module:Class": the shipped ones, then those the entry points add (discover()).
REGISTRY: dict[str, str] = dict(BUILTIN)

_instances: dict[str, Backend] = {}
_discovered = False


def discover(refresh: bool = False) -> None:
    """Add the backends of the `yolotui.backends` entry-point group to REGISTRY (once per process, or again
    with `refresh` after a package was put on the path)."""
    global _discovered
    if _discovered and not refresh:
        return
    _discovered = True
    from importlib.metadata import entry_points

    try:
        found = entry_points(group=GROUP)
    except Exception:  # a broken distribution's metadata must not take the shipped backends down with it
        return
    for entry in found:
        if entry.name not in BUILTIN:
            REGISTRY.setdefault(entry.name, entry.value)


def register_backend(name: str, target: str) -> None:
    """Make `get_backend(name)` return an instance of `target` ("module:Class")."""
    REGISTRY[name] = target
    _instances.pop(name, None)


def backend_names() -> list[str]:
    """The known names: the shipped ones first, then the installed packages' ones."""
    discover()
    return list(REGISTRY)


def get_backend(name: str | None) -> Backend:
    """The backend called `name` (None or '' mean yolotui's engine); UserError for an unknown one."""
    key = name or ENGINE
    if key in _instances:
        return _instances[key]
    if key not in REGISTRY:
        discover()
    target = REGISTRY.get(key)
    if target is None:
        raise UserError(f"backend {key!r} is not known; use one of: {', '.join(backend_names())} (or install the "
                        "package that provides it)")
    module_name, _, class_name = target.partition(":")
    try:
        backend_class = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:  # a registered backend whose module is broken: say so
        raise UserError(f"backend {key!r} cannot be loaded from {target}: {exc}") from exc
    instance = backend_class()
    _instances[key] = instance
    return instance


__all__ = ["BUILTIN", "Backend", "ENGINE", "EXEC", "GROUP", "REGISTRY", "backend_names", "discover", "get_backend",
           "register_backend"]
