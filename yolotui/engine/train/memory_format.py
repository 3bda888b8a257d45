"""The memory format the trainer keeps the model and its input batches in."""

from __future__ import annotations

import torch
from torch import nn


def training_memory_format(device: torch.device | str) -> torch.memory_format:
    """channels_last on every device.

    On CUDA it feeds cuDNN's NHWC kernels (and tensor cores under AMP); on the CPU oneDNN's convolutions run
    natively in NHWC too, which saves a layout reorder around every convolution (about 10 % of a step).
    """
    return torch.channels_last


def prepare_for_training(model: nn.Module, device: torch.device | str) -> nn.Module:
    """`model` on `device` in the training memory format (the same model object)."""
    device = torch.device(device)
    return model.to(device).to(memory_format=training_memory_format(device))
