"""Load a checkpoint with torch.load(weights_only=True) and print what came out, as one JSON line.

Run by `yolotui doctor --deep` as `python -m yolotui.engine.tools.deepcheck PATH` in a subprocess, so the
doctor's own process never imports torch. weights_only=True refuses any pickle that would import or
call something beyond tensors and plain values, so nothing in the file runs.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any


def _summary(value: Any) -> dict[str, Any]:
    import torch

    out: dict[str, Any] = {"type": type(value).__name__}
    if isinstance(value, dict):
        out["keys"] = [str(k) for k in value]
        tensors = 0
        numel = 0
        for item in value.values():
            if isinstance(item, dict):
                for sub in item.values():
                    if isinstance(sub, torch.Tensor):
                        tensors += 1
                        numel += sub.numel()
        out["tensors"] = tensors
        out["numel"] = numel
        for key in ("epoch", "step", "epochs"):
            if isinstance(value.get(key), int):
                out[key] = value[key]
    return out


def _reason(message: str) -> str:
    """The informative line of torch's (long, coloured) refusal message."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in message.splitlines()]
    lines = [line for line in lines if line]
    for line in lines:
        if "Unsupported global" in line or "WeightsUnpickler error" in line:
            return line
    return lines[0] if lines else "load failed"


def deep_check(path: str) -> dict[str, Any]:
    """torch.load(path, weights_only=True) on the CPU; {'ok': bool, 'error': str | None, ...}."""
    import torch

    try:
        value = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - the refusal itself is the answer
        return {"ok": False, "error": f"{type(exc).__name__}: {_reason(str(exc))}"[:400],
                "torch": str(torch.__version__)}
    return {"ok": True, "error": None, "torch": str(torch.__version__), **_summary(value)}


def main(argv: list[str] | None = None) -> int:
    """Print the deep check's JSON for the path given on the command line."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(json.dumps({"ok": False, "error": "usage: python -m yolotui.engine.tools.deepcheck PATH"}))
        return 2
    print(json.dumps(deep_check(args[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
