"""Print the torch environment as one JSON object: versions, CUDA, GPUs.

Run as `python -m yolotui.engine.tools.probe` by yolotui.health.environment, in a subprocess, so the
TUI process never imports torch. Never fails: what cannot be read is null, with `error` set.
"""

from __future__ import annotations

import json
import platform
import sys


def probe() -> dict:
    """The environment as a JSON-ready dict."""
    info: dict = {"python": platform.python_version(), "executable": sys.executable, "torch": None,
                  "torchvision": None, "cuda": None, "cudnn": None, "cuda_available": False, "device_count": 0,
                  "devices": [], "error": None}
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - any import failure is the answer
        info["error"] = f"torch does not import: {exc}"
        return info
    info["torch"] = str(torch.__version__)
    info["cuda"] = torch.version.cuda
    try:
        import torchvision

        info["torchvision"] = str(torchvision.__version__)
    except Exception as exc:  # noqa: BLE001
        info["error"] = f"torchvision does not import: {exc}"
    try:
        info["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        info["cuda_available"] = bool(torch.cuda.is_available())
        if info["cuda_available"]:
            info["device_count"] = torch.cuda.device_count()
            for index in range(info["device_count"]):
                props = torch.cuda.get_device_properties(index)
                info["devices"].append({"index": index, "name": props.name,
                                        "memory_mb": int(props.total_memory // (1024 * 1024)),
                                        "capability": f"{props.major}.{props.minor}"})
    except Exception as exc:  # noqa: BLE001
        info["error"] = f"CUDA query failed: {exc}"
    return info


def main() -> int:
    """Print the probe's JSON on one line."""
    print(json.dumps(probe()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
