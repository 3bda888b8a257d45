"""Backends: the kinds of trainer yolotui can run.

base.py is the interface (Backend, Capabilities, CommandRequest, LaunchSpec, RunOutputs, the remedy names;
docs/architecture.md, "Backend interface"). One package per backend: engine/ (yolotui's own trainer), exec/
(any command), official/ (the official YOLOv9 repository), ultralytics/ (ultralytics' trainer).

`get_backend(name)` returns the backend run.yaml's `backend` names. REGISTRY maps each name to "module:Class",
imported only when asked for, so adding a backend is one line here (or a `register_backend` call) and never
slows down `yolotui ls`.

shimkit.py is what the trainer shims (official/shim.py, ultralytics/shim.py) share, loaded by path in the
trainer's interpreter: messages, yolotui's events writer (runs/events.py), atomic writes, failure classes.
"""

from __future__ import annotations

import importlib

from yolotui.backends.base import Backend
from yolotui.errors import UserError

ENGINE = "yolotui"  # run.yaml's name for yolotui's own trainer (also reachable as "engine")
EXEC = "exec"

# name -> "module:Class". The official trainer's backend adds "official" here.
REGISTRY: dict[str, str] = {
    ENGINE: "yolotui.backends.engine.backend:EngineBackend",
    "engine": "yolotui.backends.engine.backend:EngineBackend",
    EXEC: "yolotui.backends.exec.backend:ExecBackend",
    "official": "yolotui.backends.official.backend:OfficialBackend",
    "ultralytics": "yolotui.backends.ultralytics:UltralyticsBackend",
}

_instances: dict[str, Backend] = {}


def register_backend(name: str, target: str) -> None:
    """Make `get_backend(name)` return an instance of `target` ("module:Class")."""
    REGISTRY[name] = target
    _instances.pop(name, None)


def backend_names() -> list[str]:
    """The registered names, in registration order."""
    return list(REGISTRY)


def get_backend(name: str | None) -> Backend:
    """The backend called `name` (None or '' mean yolotui's engine); UserError for an unknown one."""
    key = name or ENGINE
    if key in _instances:
        return _instances[key]
    target = REGISTRY.get(key)
    if target is None:
        raise UserError(f"backend {key!r} is not known; use one of: {', '.join(backend_names())}")
    module_name, _, class_name = target.partition(":")
    try:
        backend_class = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:  # a registered backend whose module is broken is a bug: say so
        raise UserError(f"backend {key!r} cannot be loaded from {target}: {exc}") from exc
    instance = backend_class()
    _instances[key] = instance
    return instance


__all__ = ["Backend", "ENGINE", "EXEC", "REGISTRY", "backend_names", "get_backend", "register_backend"]
