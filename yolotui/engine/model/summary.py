"""Size summary of a model config: the training model, the same fused, and the inference conversion."""

from __future__ import annotations

from pathlib import Path

from yolotui.engine.model.builder import build_model
from yolotui.engine.model.convert import convert_for_inference, fuse
from yolotui.engine.model.flops import model_info
from yolotui.engine.model.heads import DualDDetect


def summarize(cfg: str | Path | dict, nc: int | None = None, imgsz: int = 640) -> dict:
    """`{'train', 'fused', 'inference'}` infos, each `{'layers', 'params', 'gflops'}`, and the `nc` used.

    The model is built without initialising weights (meta device, then uninitialised CPU storage), so
    this is quick even for the large configs; values are never read, only shapes.
    """
    model = build_model(cfg, nc=nc, device="meta").materialize("cpu")
    train = model_info(model, imgsz)
    dual = isinstance(model.detect, DualDDetect)
    converted = convert_for_inference(model) if dual else None
    fused = model_info(fuse(model), imgsz)
    # a single-head model converts to exactly its fused self
    inference = model_info(converted, imgsz) if dual else dict(fused)
    return {"train": train, "fused": fused, "inference": inference, "nc": model.nc}


def shipped_summary_table(imgsz: int = 640) -> dict[str, dict]:
    """The contents of `yolotui/configs/models/summary.json`: every shipped config at nc=80."""
    from yolotui.configs import shipped_model_configs

    table = {}
    for name in shipped_model_configs():
        s = summarize(name, nc=80, imgsz=imgsz)
        table[name] = {
            "layers": s["train"]["layers"],
            "params": s["train"]["params"],
            "params_fused": s["fused"]["params"],
            "gflops": round(s["train"]["gflops"], 2),
            "gflops_fused": round(s["fused"]["gflops"], 2),
            "params_inference": s["inference"]["params"],
            "gflops_inference": round(s["inference"]["gflops"], 2),
        }
    return table


def write_shipped_summary(path: str | Path | None = None) -> Path:
    """Regenerate summary.json (run after changing a shipped config: `python -m yolotui.engine.model.summary`)."""
    import json

    from yolotui.configs import MODELS_DIR

    target = Path(path) if path else MODELS_DIR / "summary.json"
    target.write_text(json.dumps(shipped_summary_table(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return target


if __name__ == "__main__":
    print(write_shipped_summary())
