"""Multi-process (DDP) helpers: rank facts from torchrun's environment, process-group setup, flag agreement.

The trainer runs one process per device under `torch.distributed.run`; only rank 0 writes files. Stop/save
requests and early stopping are agreed with an all-reduce so every rank leaves the loop at the same step.
NCCL async error handling and a collective timeout are set so a dead peer ends the job instead of hanging it.
"""

from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

DEFAULT_TIMEOUT_MIN = 30.0


@dataclass(frozen=True)
class DistInfo:
    """This process's place in the job."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @property
    def main(self) -> bool:
        """True on the one process that writes files."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        """True when more than one process trains."""
        return self.world_size > 1


def dist_info() -> DistInfo:
    """Read RANK, LOCAL_RANK and WORLD_SIZE as torchrun sets them (1 process when absent)."""
    return DistInfo(int(os.environ.get("RANK", 0)), int(os.environ.get("LOCAL_RANK", 0)),
                    int(os.environ.get("WORLD_SIZE", 1)))


def init(info: DistInfo, cuda: bool) -> None:
    """Join the process group: NCCL on CUDA, gloo on the CPU, with a collective timeout."""
    if not info.distributed or dist.is_initialized():
        return
    # Both spellings: newer torch reads TORCH_NCCL_*, older NCCL_*.
    os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    os.environ.setdefault("NCCL_ASYNC_ERROR_HANDLING", "1")
    minutes = float(os.environ.get("YOLOTUI_DDP_TIMEOUT_MIN", DEFAULT_TIMEOUT_MIN))
    if cuda:
        torch.cuda.set_device(info.local_rank)
    dist.init_process_group(backend="nccl" if cuda else "gloo", timeout=_dt.timedelta(minutes=minutes))


def rank_device(info: DistInfo, device: str) -> torch.device:
    """This process's device under torchrun: cuda:<local_rank> when GPUs are listed, else the CPU.

    The launcher sets CUDA_VISIBLE_DEVICES to the listed GPUs (`--device 2,3` -> "2,3"), so local rank k
    uses the k-th listed GPU; UserError when that GPU is not visible.
    """
    from yolotui.errors import UserError

    if str(device or "").strip().lower() in ("", "cpu"):
        return torch.device("cpu")
    if not torch.cuda.is_available() or info.local_rank >= torch.cuda.device_count():
        raise UserError(f"--device {device}: process {info.local_rank} of this node has no GPU "
                        f"({torch.cuda.device_count()} visible); list one GPU per process or use --device cpu")
    return torch.device(f"cuda:{info.local_rank}")


def convert_sync_bn(model: torch.nn.Module, enabled: bool, info: DistInfo, cuda: bool) -> tuple[torch.nn.Module, int]:
    """BatchNorm layers replaced by SyncBatchNorm when asked for, under DDP, on GPUs; (model, layers converted).

    torch's SyncBatchNorm runs on GPUs only, so on the CPU (gloo) the layers stay local, as the official
    trainer does (`sync_bn and cuda and RANK != -1`).
    """
    if not (enabled and info.distributed and cuda):
        return model, 0
    count = sum(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules())
    return torch.nn.SyncBatchNorm.convert_sync_batchnorm(model), count


def agree(flags: list[bool], info: DistInfo, device: torch.device) -> list[bool]:
    """Each flag true on any rank becomes true on all ranks."""
    if not info.distributed:
        return flags
    tensor = torch.tensor([1.0 if f else 0.0 for f in flags], device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return [bool(v) for v in tensor.tolist()]


def finish(info: DistInfo) -> None:
    """Leave the process group."""
    if info.distributed and dist.is_initialized():
        dist.destroy_process_group()
