"""Recognising a failure class from error text (torch-free), for exceptions and for a trainer's log tail.

The yolotui trainer names its failure in an `error` event; a command that writes no events (the official
train_dual.py, `yolotui exec`) still prints CUDA's and NCCL's messages, so the supervisor reads the tail of
train.log for them when an attempt ends without an event.
"""

from __future__ import annotations

# Lower-case fragments. Out of memory: also when a DataLoader worker re-raises it ("Caught OutOfMemoryError"),
# and cuDNN's ways of saying it has no memory for a workspace (as ultralytics 8.4.53 treats them): its internal
# error and "unable to find an engine" are what a convolution reports when its workspace allocation failed.
# Only accelerator memory: a host (CPU) allocation failure is not `oom` and gets no CUDA remedies;
# torch words both as "OutOfMemoryError", so the bare class name counts only beside a device word.
OOM_TEXT = ("cuda out of memory", "cublas_status_alloc_failed", "cudnn_status_alloc_failed",
            "cudnn_status_not_enough_workspace", "cudnn_status_internal_error", "unable to find an engine",
            "hip out of memory", "mps backend out of memory")
DEVICE_WORDS = ("cuda", "cudnn", "cublas", "gpu", "hip", "mps")
HOST_ALLOC_TEXT = ("defaultcpuallocator", "alloc_cpu", "cannot allocate memory", "memoryerror")
COMM_TEXT = ("nccl error", "ncclerror", "ncclsystemerror", "ncclremoteerror", "ncclinternalerror",
             "processgroupnccl", "processgroupgloo", "gloo/transport", "connection reset by peer",
             "connectionreseterror", "collective operation timeout", "watchdog caught collective",
             "distbackenderror", "distnetworkerror", "diststoreerror", "socket timeout")


def classify_text(text: str | None) -> str | None:
    """'oom' or 'comm' when `text` holds one of their tell-tale messages, else None."""
    lowered = (text or "").lower()
    if any(fragment in lowered for fragment in OOM_TEXT):
        return "oom"
    if "outofmemoryerror" in lowered and any(word in lowered for word in DEVICE_WORDS) \
            and not any(fragment in lowered for fragment in HOST_ALLOC_TEXT):
        return "oom"
    if any(fragment in lowered for fragment in COMM_TEXT):
        return "comm"
    return None
