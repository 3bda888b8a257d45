"""The trainer's start-up: the device, seeds and attempt number, opt.yaml/hyp.yaml with the resume overrides,
and the model (from last.pt, from --weights with what did not transfer re-initialised, or from its YAML),
frozen layers and DDP. A mixin of yolotui.engine.train.trainer.Trainer.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from yolotui.backends.official.weights import load_weights_source
from yolotui.config import load_hyp, load_yaml, parse_freeze
from yolotui.engine.model import build_model
from yolotui.engine.train import checkpoint as ckpt_io
from yolotui.engine.train import ddp
from yolotui.engine.train.memory_format import prepare_for_training
from yolotui.errors import UserError
from yolotui.runs import layout

LOG = logging.getLogger("yolotui.trainer")  # train.log by default; see yolotui/logconfig.py
DATA_LOG = logging.getLogger("yolotui.data")
DDP_LOG = logging.getLogger("yolotui.ddp")


def select_device(device: str) -> torch.device:
    """'cpu', '' (first GPU if any), '0', '0,1' (first of them here) -> torch.device; UserError if absent."""
    text = (device or "").strip().lower()
    if text == "cpu" or (text == "" and not torch.cuda.is_available()):
        return torch.device("cpu")
    first = text.replace("cuda:", "").split(",")[0] or "0"
    if not torch.cuda.is_available() or int(first) >= torch.cuda.device_count():
        raise UserError(f"--device {device}: no such CUDA device here; use --device cpu")
    return torch.device(f"cuda:{int(first)}")


def seed_everything(seed: int, deterministic: bool) -> None:
    """Seed python, numpy and torch; make kernels deterministic where torch can."""
    import random

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True


def read_attempt(run_dir: Path) -> int:
    """The supervisor's attempt number (YOLOTUI_ATTEMPT, else status.json, else 1)."""
    value = os.environ.get("YOLOTUI_ATTEMPT")
    if value and value.isdigit():
        return int(value)
    from yolotui.runs.status import read_status

    status = read_status(run_dir)
    return max(1, int(status.attempt)) if status and status.attempt else 1


def freeze_prefixes(freeze: list[int] | str, backbone_layers: int) -> list[str]:
    """Parameter-name prefixes to freeze: official rule (one N = layers 0..N-1, several = those), or the backbone."""
    if freeze == "backbone":
        layers: list[int] = list(range(backbone_layers))
    elif len(freeze) > 1:
        layers = list(freeze)
    else:
        layers = list(range(freeze[0])) if freeze else []
    return [f"model.{i}." for i in layers]


def transfer_weights(model: nn.Module, source: dict[str, torch.Tensor]) -> tuple[int, int, list[str]]:
    """Copy the tensors of `source` whose name and shape match; returns (transferred, total, skipped names)."""
    target = model.state_dict()
    matched = {k: v for k, v in source.items() if k in target and tuple(v.shape) == tuple(target[k].shape)}
    skipped = sorted(k for k in source if k in target and k not in matched)
    model.load_state_dict(matched, strict=False)
    return len(matched), len(target), skipped


class TrainerStartup:
    """Options and model for the trainer (see the module docstring)."""

    def _load_options(self) -> None:
        self.opt = load_yaml(self.run_dir / layout.OPT_YAML, "opt.yaml")
        hyp_file = self.run_dir / layout.HYP_YAML
        self.hyp = load_hyp(hyp_file) if hyp_file.exists() else load_hyp(Path(self.opt["hyp"]))
        self.opt["freeze"] = parse_freeze(self.opt.get("freeze", [0]))
        self.resume_ckpt: dict[str, Any] | None = None
        if self.last_path.exists():
            try:
                self.resume_ckpt = ckpt_io.load_checkpoint(self.last_path)
            except Exception as exc:
                raise UserError(f"{self.last_path}: cannot load it to resume ({exc}); run yolotui doctor") from exc
        ov = self.overrides
        if self.resume_ckpt is not None:
            saved = self.resume_ckpt["opt"]
            planned = int(self.resume_ckpt["epochs"])
            self.opt = {**self.opt, **{k: v for k, v in saved.items()
                                        if k not in ("batch_size", "device", "workers", "cache")}}
            self.opt["freeze"] = parse_freeze(self.opt.get("freeze", [0]))
            self.opt["epochs"] = planned
            self.hyp = dict(self.resume_ckpt["hyp"])
        if ov.epochs is not None:
            self.opt["epochs"] = int(ov.epochs)
        if ov.batch_size is not None:
            self.opt["batch_size"] = int(ov.batch_size)
        if ov.device is not None:
            self.opt["device"] = ov.device
        if ov.workers is not None:
            self.opt["workers"] = int(ov.workers)
        if ov.cache is not None:
            self.opt["cache"] = None if ov.cache == "none" else ov.cache
        self.epochs = int(self.opt["epochs"])
        self.batch_size = int(self.opt["batch_size"])
        self.lr_scale = float(ov.lr_scale if ov.lr_scale is not None else self.opt.get("lr_scale", 1.0))
        if not self.lr_scale > 0:
            raise UserError(f"--lr-scale {self.lr_scale}: must be above 0")
        self.opt["lr_scale"] = self.lr_scale
        saved_batch = int(self.resume_ckpt["opt"].get("batch_size", 0)) if self.resume_ckpt is not None else 0
        saved_accumulate = self.opt.get("accumulate") if saved_batch == self.batch_size else None
        if ov.accumulate is not None and ov.accumulate < 1:
            raise UserError(f"--accumulate {ov.accumulate}: must be at least 1")
        self.accumulate_override = ov.accumulate or (int(saved_accumulate) if saved_accumulate else None)

    def _build_model(self) -> None:
        nc, names = self.nc, self.names
        self.transfer_note = None
        if self.resume_ckpt is not None:
            model = build_model(self.resume_ckpt["model_yaml"], nc=int(self.resume_ckpt["nc"]))
            model.load_state_dict(self.resume_ckpt["model"])
        elif self.opt.get("weights"):
            source = load_weights_source(self.opt["weights"])  # yolotui, or official read inertly
            cfg = self.opt.get("cfg") or source.get("model_yaml")
            if not cfg:
                raise UserError(f"--weights {self.opt['weights']}: it does not record its model config; "
                                "give --cfg (the model YAML it was trained with) too")
            model = build_model(cfg, nc=nc)
            weights = source.get("ema") or source["model"]
            done, total, skipped = transfer_weights(model, weights)
            self.transfer_note = {"transferred": done, "total": total, "reinitialised": skipped,
                                  "source_nc": int(source.get("nc") or nc), "official": bool(source.get("official"))}
            self._log(f"Transferred {done}/{total} items from {self.opt['weights']}"
                      + (f"; re-initialised {len(skipped)} (class count {source.get('nc')} -> {nc})" if skipped else ""))
        else:
            model = build_model(self.opt["cfg"], nc=nc)
        model.names = names
        prefixes = freeze_prefixes(self.opt["freeze"], int(getattr(model, "backbone_layers", 0)))
        self.freeze_prefixes = tuple(prefixes)
        self.frozen = 0
        for name, param in model.named_parameters():
            if any(name.startswith(p) for p in prefixes):
                param.requires_grad_(False)
                self.frozen += 1
        if self.frozen:
            self._log(f"Froze {self.frozen} parameter tensors ({len(prefixes)} layers)")
        self.model = prepare_for_training(model, self.device)
        if self.dist.distributed:
            from torch.nn.parallel import DistributedDataParallel

            self.model, synced = ddp.convert_sync_bn(self.model, bool(self.opt.get("sync_bn")), self.dist, self.cuda)
            if synced:
                self._log(f"SyncBatchNorm: {synced} BatchNorm layers synchronised across the processes",
                          logger=DDP_LOG)
            ids = [self.dist.local_rank] if self.cuda else None
            self.model = DistributedDataParallel(self.model, device_ids=ids, output_device=ids[0] if ids else None)
