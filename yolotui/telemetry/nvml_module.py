"""Which NVML module the GPU sampler uses: pynvml (nvidia-ml-py), or the one YOLOTUI_NVML_MODULE names.

YOLOTUI_NVML_MODULE (for tests and diagnosis) names a module (`package.fake_nvml`) or a Python file
(`/path/to/fake_nvml.py`) with pynvml's API; processes that yolotui starts (the supervisor's GPU watcher)
inherit it, so a whole run can be driven against a scripted GPU.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from typing import Any

ENV_MODULE = "YOLOTUI_NVML_MODULE"


def load_nvml() -> tuple[Any | None, str | None]:
    """(module, None), or (None, the reason in words) when no NVML module can be imported."""
    name = os.environ.get(ENV_MODULE, "").strip()
    if not name:
        try:
            import pynvml
        except ImportError:
            return None, "nvidia-ml-py is not installed (pip install nvidia-ml-py): no GPU readings"
        return pynvml, None
    try:
        if name.endswith(".py"):
            spec = importlib.util.spec_from_file_location("yolotui_nvml_stand_in", name)
            if spec is None or spec.loader is None:
                return None, f"{ENV_MODULE}={name}: not a Python file"
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module, None
        return importlib.import_module(name), None
    except Exception as exc:  # noqa: BLE001 - any failure of a stand-in is a reason, never a crash
        return None, f"{ENV_MODULE}={name}: cannot be loaded ({type(exc).__name__}: {exc})"
