"""The memory format the trainer keeps the model and its input batches in.

Also: Keep freed host memory in the trainer process instead of handing it back to the kernel after every step.

A training step allocates and frees the same activation and gradient buffers each time. glibc serves the large
ones with fresh `mmap`s (and trims the heap top back to the kernel), so every step pays again for page faults on
memory it just returned: measured ~22 000 minor faults and ~45 ms of system time per gelan-t step on the CPU
(320 px, batch 8; ~5 % of the step). With mmap off for allocations and heap trimming off, freed blocks are
reused: no faults, ~5 ms of system time. Resident memory then stays at its peak instead of shrinking between
phases, as a caching allocator's does. Only glibc is tuned (elsewhere nothing changes); YOLOTUI_HOST_MEMORY=release
keeps the C library's defaults.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

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


_M_TRIM_THRESHOLD = -1  # mallopt parameters from glibc's malloc.h
_M_TOP_PAD = -2
_M_MMAP_MAX = -4
_NEVER_TRIM = 2**31 - 1  # an int; glibc treats it as "trim only above 2 GiB of free heap top"


def keep_freed_memory() -> str:
    """Tune glibc's malloc as the module docstring says; returns what was done, for the log."""
    if os.environ.get("YOLOTUI_HOST_MEMORY", "").strip().lower() == "release":
        return "host memory: C library defaults (YOLOTUI_HOST_MEMORY=release)"
    if not sys.platform.startswith("linux"):
        return "host memory: C library defaults (not Linux)"
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return "host memory: C library defaults (no glibc mallopt)"
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    done = [mallopt(_M_MMAP_MAX, 0), mallopt(_M_TRIM_THRESHOLD, _NEVER_TRIM), mallopt(_M_TOP_PAD, 64 << 20)]
    if not all(done):
        return "host memory: C library defaults (mallopt refused)"
    return "host memory: freed blocks kept for reuse (no mmap, no heap trim)"
