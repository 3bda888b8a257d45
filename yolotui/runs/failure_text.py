"""Recognising a failure class from error text (torch-free), for exceptions and for a trainer's log tail.

The yolotui trainer names its failure in an `error` event; a command that writes no events (the official
train_dual.py, `yolotui exec`) still prints CUDA's and NCCL's messages, so the supervisor reads the tail of
train.log for them when an attempt ends without an event.
"""

from __future__ import annotations

# Lower-case fragments. Out of memory: also when a DataLoader worker re-raises it ("Caught OutOfMemoryError"),
# and cuDNN's ways of saying it has no memory for a workspace (as ultralytics 8.4.53 treats them): its internal
# error and "unable to find an engine" are what a convolution reports when its workspace allocation failed.
OOM_TEXT = ("cuda out of memory", "outofmemoryerror", "cublas_status_alloc_failed", "cudnn_status_alloc_failed",
            "cudnn_status_internal_error", "unable to find an engine", "hip out of memory",
            "mps backend out of memory")
COMM_TEXT = ("nccl error", "ncclerror", "ncclsystemerror", "ncclremoteerror", "ncclinternalerror",
             "processgroupnccl", "processgroupgloo", "gloo/transport", "connection reset by peer",
             "connectionreseterror", "collective operation timeout", "watchdog caught collective",
             "distbackenderror", "distnetworkerror", "diststoreerror", "socket timeout")


def classify_text(text: str | None) -> str | None:
    """'oom' or 'comm' when `text` holds one of their tell-tale messages, else None."""
    lowered = (text or "").lower()
    if any(fragment in lowered for fragment in OOM_TEXT):
        return "oom"
    if any(fragment in lowered for fragment in COMM_TEXT):
        return "comm"
    return None
