"""Crash-proof checkpoints: a plain dict of tensors and plain values, written atomically with a manifest.

The file loads with `torch.load(path, weights_only=True)` (no pickled classes: opening it runs no code).
Writing: serialise in memory, hash, write a temporary file beside the target, fsync, `os.replace`, fsync the
folder; then the manifest `<name>.pt.json` (sha256, bytes, epoch, step, epochs, keys) the same way. A kill
before the replace leaves the previous checkpoint and its manifest untouched.

Fault injection for tests: YOLOTUI_CHECKPOINT_FAULT=mid-write|before-replace kills the process with SIGKILL
at that point of the next checkpoint write (YOLOTUI_CHECKPOINT_FAULT_AFTER=N skips the first N writes).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import io
import os
import platform
import random
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from yolotui import __version__
from yolotui.runs.atomic import atomic_open, atomic_write_json, fsync_dir, read_json
from yolotui.runs.layout import manifest_path
from yolotui.runs.manifest import pending_manifest_path

FORMAT = "yolotui-1"
_CHUNK = 1 << 20
_writes_done = 0


# ------------------------------------------------------------------------------------------ RNG state

def rng_state() -> dict[str, Any]:
    """torch, CUDA, numpy and python RNG states as tensors and plain values (weights_only-safe)."""
    np_kind, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state()
    py_version, py_internal, py_gauss = random.getstate()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "kind": str(np_kind),
            "keys": torch.from_numpy(np.asarray(np_keys, dtype=np.int64)),
            "pos": int(np_pos),
            "has_gauss": int(np_has_gauss),
            "gauss": float(np_gauss),
        },
        "python": {"version": int(py_version), "internal": list(py_internal), "gauss": py_gauss},
        "cuda": [],
    }
    if torch.cuda.is_available():
        state["cuda"] = list(torch.cuda.get_rng_state_all())
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what `rng_state` saved (CUDA states only where the same devices exist)."""
    if not state:
        return
    torch.set_rng_state(state["torch"])
    numpy_state = state["numpy"]
    np.random.set_state((
        numpy_state["kind"],
        numpy_state["keys"].numpy().astype(np.uint32),
        numpy_state["pos"],
        numpy_state["has_gauss"],
        numpy_state["gauss"],
    ))
    python_state = state["python"]
    random.setstate((python_state["version"], tuple(python_state["internal"]), python_state["gauss"]))
    cuda_states = state.get("cuda") or []
    if cuda_states and torch.cuda.is_available() and len(cuda_states) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda_states)


# ----------------------------------------------------------------------------------------------- write

def versions() -> dict[str, Any]:
    """Software versions recorded in every checkpoint."""
    return {
        "yolotui": __version__,
        "torch": str(torch.__version__),
        "cuda": str(torch.version.cuda) if torch.version.cuda else None,
        "python": platform.python_version(),
    }


def now_iso() -> str:
    """Local time as ISO 8601, as the official checkpoints record it."""
    return _dt.datetime.now().isoformat()


def _maybe_fault(point: str) -> None:
    """Kill this process at `point` when the fault-injection variables ask for it (tests only)."""
    wanted = os.environ.get("YOLOTUI_CHECKPOINT_FAULT")
    if wanted != point:
        return
    if _writes_done < int(os.environ.get("YOLOTUI_CHECKPOINT_FAULT_AFTER", "0")):
        return
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(10)  # SIGKILL is asynchronous on some systems; never continue past this point


def serialize(ckpt: dict[str, Any]) -> bytes:
    """The bytes `torch.save` writes for `ckpt`."""
    buffer = io.BytesIO()
    torch.save(ckpt, buffer)
    return buffer.getvalue()


def save_checkpoint(ckpt: dict[str, Any], path: Path) -> dict[str, Any]:
    """Write `ckpt` to `path` atomically, then its manifest; returns the manifest plus `seconds` taken."""
    global _writes_done
    started = time.perf_counter()
    path = Path(path)
    data = serialize(ckpt)
    digest = hashlib.sha256(data).hexdigest()
    manifest = {
        "sha256": digest,
        "bytes": len(data),
        "epoch": int(ckpt.get("epoch", 0)),
        "step": int(ckpt.get("step", 0)),
        "epochs": int(ckpt.get("epochs", 0)),
        "keys": sorted(ckpt.keys()),
        "format": ckpt.get("format", FORMAT),
        "date": ckpt.get("date"),
    }
    # The manifest waits beside the checkpoint until the checkpoint is in place, so a kill between the two
    # renames can be settled either way (yolotui/runs/manifest.py: reconcile).
    pending = pending_manifest_path(path)
    atomic_write_json(pending, manifest)
    with atomic_open(path, "wb") as handle:
        half = len(data) // 2
        handle.write(data[:half])
        handle.flush()
        _maybe_fault("mid-write")
        for offset in range(half, len(data), _CHUNK):
            handle.write(data[offset:offset + _CHUNK])
        handle.flush()
        os.fsync(handle.fileno())
        _maybe_fault("before-replace")
    os.utime(pending)  # newer than the checkpoint it describes, as readers expect of a manifest
    os.replace(pending, manifest_path(path))
    fsync_dir(path.parent)
    _writes_done += 1
    return {**manifest, "seconds": round(time.perf_counter() - started, 4)}


# ------------------------------------------------------------------------------------------------ read

def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a yolotui checkpoint safely (weights_only=True)."""
    return torch.load(Path(path), map_location=map_location, weights_only=True)


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def manifest_matches(path: Path) -> bool:
    """True when `<path>.json` exists and its sha256 and size match the file."""
    manifest = read_json(manifest_path(path))
    if not isinstance(manifest, dict) or not Path(path).is_file():
        return False
    return manifest.get("bytes") == Path(path).stat().st_size and manifest.get("sha256") == file_sha256(path)


def is_finished(ckpt: dict[str, Any]) -> bool:
    """A checkpoint whose planned epochs are all done."""
    return int(ckpt.get("epoch", 0)) >= int(ckpt.get("epochs", 0))
