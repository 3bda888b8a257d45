"""`--compile`: the training forward (and its backward) through torch.compile, with an eager fallback.

The model is compiled lazily by torch; to compile both graphs before training and to catch a failure where it
can still be undone, the first call runs one trial step: the compiled forward on the real batch and a backward
of a stand-in scalar, after which every BatchNorm buffer and every gradient is put back exactly as it was, so the
trial leaves no trace in the run (exact resume compares a compiled run with a compiled run, bit for bit on the
same machine). The trial's wall time, compilation included, is reported as the compile time: a `compile` event
and a train.log line. When anything in it raises, a `warning` event (kind `compile`) says why and the run goes on
uncompiled.

Shapes are static (`dynamic=False`): a short last batch gets its own graph, whatever order the shapes come in, so
a run resumed at any batch uses the same kernels as one never stopped. The checkpointed module is always the
uncompiled one (no `_orig_mod.` prefixes), so checkpoints load without compile. Off by default; worth it on CUDA
(see bench/gpu_check.sh), small on a CPU (bench/bench_vs_ultralytics.py --compile).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

MODE = "default"  # torch.compile mode; "max-autotune" compiles far longer for little in training
BACKEND = "inductor"  # tests may use "eager" (no code generation)


class TrainingForward:
    """Calls the model for a training step: compiled when `enabled` (after a successful trial), eager otherwise."""

    def __init__(self, model: nn.Module, enabled: bool, emit: Callable[..., Any] | None = None,
                 log: Callable[[str], None] | None = None) -> None:
        self.model = model
        self.emit = emit or (lambda *_args, **_fields: None)
        self.log = log or (lambda _message: None)
        self.state = "pending" if enabled else "off"
        self.seconds: float | None = None
        self._compiled: Callable[..., Any] | None = None

    def __call__(self, imgs: torch.Tensor):
        if self.state == "pending":
            self._trial(imgs)
        if self.state == "on" and self._compiled is not None:
            return self._compiled(imgs)
        return self.model(imgs)

    def _trial(self, imgs: torch.Tensor) -> None:
        started = time.monotonic()
        try:
            self._compiled = torch.compile(self.model, backend=BACKEND, mode=None if BACKEND != "inductor" else MODE,
                                           dynamic=False)
            with _restored(self.model):
                out = self._compiled(imgs)
                stand_in = sum(t.float().sum() for t in _tensors(out))
                no_sync = getattr(self.model, "no_sync", None)  # DDP: the trial must not all-reduce
                with no_sync() if callable(no_sync) else contextlib.nullcontext():
                    stand_in.backward()
        except Exception as exc:  # noqa: BLE001 - any compiler failure means "train without it"
            self.state, self._compiled = "failed", None
            reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            self.emit("warning", kind="compile", message=f"torch.compile failed ({reason}); training without it",
                      traceback="")
            self.log(f"compile: failed after {time.monotonic() - started:.1f} s ({reason}); training uncompiled")
            return
        self.seconds = time.monotonic() - started
        self.state = "on"
        self.emit("compile", seconds=round(self.seconds, 3), mode=MODE, backend=BACKEND,
                  input=list(imgs.shape))
        self.log(f"compile: torch.compile ({MODE}) of the training forward and backward took {self.seconds:.1f} s")


def _tensors(tree: Any) -> list[torch.Tensor]:
    if isinstance(tree, torch.Tensor):
        return [tree] if tree.requires_grad else []
    if isinstance(tree, (list, tuple)):
        return [t for item in tree for t in _tensors(item)]
    return []


@contextlib.contextmanager
def _restored(model: nn.Module):
    """Put every buffer (BatchNorm statistics and counters) and every parameter gradient back afterwards."""
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    grads = [(p, None if p.grad is None else p.grad.detach().clone()) for p in model.parameters()]
    try:
        yield
    finally:
        with torch.no_grad():
            for buffer, saved in buffers:
                buffer.copy_(saved)
            for param, saved in grads:
                param.grad = saved


def training_forward(model: nn.Module, compile_model: bool, emit: Callable[..., Any] | None = None,
                     log: Callable[[str], None] | None = None) -> TrainingForward:
    """The callable a training step runs the model with (see TrainingForward)."""
    return TrainingForward(model, bool(compile_model), emit, log)
