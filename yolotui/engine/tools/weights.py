"""Loading a yolotui checkpoint as a model ready for evaluation (validation, prediction).

A yolotui checkpoint (format 'yolotui-1') is a plain dict that loads with `weights_only=True` and
carries the model's yaml (`model_yaml`), so it rebuilds its own model; the EMA weights are preferred
over the raw ones, as the trainer validates and picks best.pt on the EMA. Official YOLOv9 checkpoints
pickle whole model classes: they are read by yolotui.backends.official.weights, which records the pickled objects
without running any code from the file, and rebuilt from the model config the pickled model kept.
"""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path

import torch
from torch import nn

from yolotui.errors import UserError


def read_checkpoint(path: str | Path) -> dict:
    """The checkpoint dict at `path`, loaded safely; UserError naming the file when it cannot be used."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"--weights {path}: file not found; give the path of a .pt checkpoint such as "
                        "runs/train/exp/weights/best.pt")
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
    except OSError as exc:
        raise UserError(f"--weights {path}: cannot read it ({exc.strerror or exc})") from None
    from yolotui.health.container import looks_like_zip

    if not looks_like_zip(head) and head[:1] != b"\x80":
        raise UserError(f"--weights {path}: not a checkpoint (neither a torch zip archive nor a pickle); give a .pt "
                        "file such as runs/train/exp/weights/best.pt")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        # Pickled classes (an official YOLOv9 .pt): read inertly, nothing from the file runs.
        from yolotui.backends.official.weights import as_source_checkpoint, read_official

        ckpt = as_source_checkpoint(read_official(path))
        if not isinstance(ckpt.get("model_yaml"), dict):
            raise UserError(f"--weights {path}: its pickled model does not record its config (no yaml), so "
                            "yolotui cannot rebuild it; fine-tune from it with `yolotui train --weights "
                            f"{path} --cfg MODEL.yaml` instead") from None
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile, ValueError, IndexError, KeyError, TypeError,
            AttributeError) as exc:  # a damaged or foreign file can fail the unpickler in many ways
        text = (str(exc).splitlines() or [type(exc).__name__])[0][:160]
        raise UserError(f"--weights {path}: cannot read the checkpoint ({text}); "
                        "it may be truncated: try last.pt or best.pt of the same run") from None
    if not isinstance(ckpt, dict):
        raise UserError(f"--weights {path}: expected a yolotui checkpoint dict, found {type(ckpt).__name__}")
    missing = [key for key in ("model_yaml",) if key not in ckpt]
    if missing or not isinstance(ckpt.get("ema") or ckpt.get("model"), dict):
        raise UserError(f"--weights {path}: not a yolotui checkpoint (needs model_yaml and a model or ema "
                        "state dict); yolotui writes these as runs/train/<name>/weights/last.pt and best.pt")
    return ckpt


def _names_of(ckpt: dict, nc: int) -> list[str]:
    names = ckpt.get("names")
    if isinstance(names, dict):
        return [str(names.get(i, names.get(str(i), i))) for i in range(nc)]
    if isinstance(names, (list, tuple)) and len(names) == nc:
        return [str(n) for n in names]
    return [str(i) for i in range(nc)]


def _build_for(ckpt: dict, model_yaml: dict, nc: int) -> nn.Module:
    """The empty model a checkpoint's state dict loads into: fused first for an exported (`fused`) one."""
    from yolotui.engine.model import build_model, fuse

    if not ckpt.get("fused"):
        return build_model(model_yaml, nc=nc or None)
    # built on the meta device (no random init), fused into the exported layout, then given storage
    model = fuse(build_model(model_yaml, nc=nc or None, device="meta"))
    return model.materialize("cpu")


def load_model_for_eval(path: str | Path, device: str | torch.device = "cpu",
                        fuse: bool = False) -> tuple[nn.Module, dict]:
    """Build the model stored in a yolotui checkpoint, load its EMA (else raw) weights, eval mode, on `device`.

    An exported inference checkpoint (`fused: True`, see yolotui.engine.tools.export) is rebuilt fused. With `fuse`
    every other model is fused too (BatchNorm folded into its convolution, RepConvN re-parameterised), as the
    official loader does before validating: faster, and the same outputs to float rounding.
    Returns `(model, info)`; info holds path, nc, names, epoch, epochs, weights ('ema' or 'model'),
    best_fitness and the checkpoint's hyp/opt dicts (empty when absent).
    """
    path = Path(path)
    ckpt = read_checkpoint(path)
    model_yaml = ckpt["model_yaml"]
    nc = int(ckpt.get("nc") or (model_yaml.get("nc") if isinstance(model_yaml, dict) else 0) or 0)
    use_ema = isinstance(ckpt.get("ema"), dict) and len(ckpt["ema"]) > 0
    state = ckpt["ema"] if use_ema else ckpt["model"]
    try:
        model = _build_for(ckpt, model_yaml, nc)
        model.load_state_dict(state, strict=True)
    except (RuntimeError, KeyError, ValueError) as exc:
        raise UserError(f"--weights {path}: its weights do not fit the model it describes "
                        f"({str(exc).splitlines()[0][:160]})") from None
    model = model.float().to(torch.device(device)).eval()
    if fuse and not ckpt.get("fused"):
        from yolotui.engine.model import fuse as fuse_layers

        model = fuse_layers(model).eval()
    nc = int(getattr(model, "nc", nc))
    info = {
        "path": str(path),
        "nc": nc,
        "names": _names_of(ckpt, nc),
        "epoch": ckpt.get("epoch"),
        "epochs": ckpt.get("epochs"),
        "weights": "ema" if use_ema else "model",
        "best_fitness": ckpt.get("best_fitness"),
        "hyp": dict(ckpt.get("hyp") or {}),
        "opt": dict(ckpt.get("opt") or {}),
    }
    return model, info
