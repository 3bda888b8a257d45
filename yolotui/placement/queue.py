"""Queued runs: the conditions a run waits for before its first attempt, and whether they hold now.

A queued run is an ordinary run whose run.yaml has a `queue` section; its detached supervisor holds the run
lock from the start (so the run is live, listed, stoppable, and `interrupted` after a reboot like any run) and
waits in state `queued`, polling `check`, before it starts attempt 1. From then on nothing differs: the same
supervisor, the same crash recovery. The conditions (all must hold):

- `after`: another run's folder; it must have ended (finished, failed or stopped; an interrupted run will be
  resumed, so it has not ended). With `after_ok` it must have finished, else the queued run never starts.
- `when_free`: the run's GPUs (its `device`, as NVML indices) must each have `mem_mib` MiB free (or, with
  none given, no process at all), and no other yolotui run may hold them: a live run running on them, or a
  queued run that claimed them. Runs waiting only for GPUs start in the order they were queued.

The decision to start is taken under an exclusive lock on `<yolotui home>/queue.lock` and recorded in the
run's status.json (`queue.claimed`) before that lock is released, so two queued runs never take one GPU.
Torch-free: NVML through yolotui.telemetry.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yolotui.errors import UserError
from yolotui.runs import index, lock
from yolotui.runs.layout import FINISHED, QUEUED, RESTARTING, RUNNING, STOPPING
from yolotui.runs.status import RunStatus, effective_state, read_status

QUEUE_LOCK = "queue.lock"
ENDED = frozenset({"finished", "failed", "stopped"})
GPU_HOLDING_STATES = frozenset({RUNNING, RESTARTING, STOPPING})
_MEM = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_MIB_PER_UNIT = {"": 1024, "k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}  # a bare number is GiB


def parse_memory(text: str) -> int:
    """'20G', '20GiB', '512M', '20' (GiB) -> MiB; UserError for anything else."""
    match = _MEM.match(text or "")
    if not match:
        raise UserError(f"--when-free {text}: not an amount of memory; write e.g. 20G or 512M")
    unit = (match.group(2) or "").lower()[:1]
    return int(float(match.group(1)) * _MIB_PER_UNIT[unit])


def gpu_indices(device: str | None) -> list[int]:
    """The NVML indices a run's --device names ('' -> [0]); UserError for the CPU."""
    text = (device or "").strip().lower().replace("cuda:", "")
    if text == "cpu":
        raise UserError("--when-free waits for GPUs, but the run's --device is cpu; drop --when-free or give "
                        "GPUs with --device")
    if not text:
        return [0]
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or not all(p.isdigit() for p in parts):
        raise UserError(f"--device {device}: not GPU indices; use e.g. 0 or 0,1 with --when-free")
    return sorted({int(p) for p in parts})


def make_spec(after: Path | None = None, after_ok: bool = False, when_free: str | None = None,
              device: str | None = None) -> dict[str, Any] | None:
    """The run.yaml `queue` section for these flags (None when nothing to wait for); validates them.

    `when_free` is None (no GPU condition), '' (GPUs with no process) or an amount ('20G').
    """
    if after is None and when_free is None:
        if after_ok:
            raise UserError("--after-ok needs --after RUN: the run whose success this one waits for")
        return None
    spec: dict[str, Any] = {"after": str(after) if after is not None else None, "after_ok": bool(after_ok),
                            "when_free": None}
    if when_free is not None:
        spec["when_free"] = {"gpus": gpu_indices(device), "mem_mib": parse_memory(when_free) if when_free else None}
    return spec


@dataclass
class Verdict:
    """What a check found: start now (`ready`), keep waiting (`reason`), or never start (`impossible`)."""

    ready: bool
    reason: str
    impossible: bool = False
    waiting_on: str | None = None  # 'after' or 'gpu' while waiting
    gpus: list[int] | None = None  # the GPUs to claim when ready


def describe(spec: dict[str, Any] | None) -> str:
    """What a queued run waits for, in a few words ('after exp1 succeeds, GPU 0 with 20 GiB free')."""
    if not spec:
        return ""
    parts = []
    if spec.get("after"):
        parts.append(f"after {Path(spec['after']).name} {'succeeds' if spec.get('after_ok') else 'ends'}")
    free = spec.get("when_free")
    if free:
        gpus = ",".join(str(g) for g in free.get("gpus") or [])
        mem = free.get("mem_mib")
        amount = f"{mem / 1024:g} GiB free" if mem else "idle"
        parts.append(f"GPU {gpus} {amount}")
    return ", ".join(parts)


def _after_verdict(spec: dict[str, Any]) -> Verdict | None:
    """None when the `after` condition holds (or there is none), else the verdict to wait or give up."""
    after = spec.get("after")
    if not after:
        return None
    other = Path(after)
    name = other.name
    if not other.is_dir():
        return Verdict(False, f"run {after} no longer exists", impossible=True)
    state = effective_state(other)
    if state not in ENDED:
        return Verdict(False, f"waiting for {name} to end (now {state})", waiting_on="after")
    if spec.get("after_ok") and state != FINISHED:
        return Verdict(False, f"{name} ended {state}, and this run starts only if it succeeds (--after-ok)",
                       impossible=True)
    return None


def _holders(gpus: set[int], me: Path) -> dict[int, str]:
    """GPU -> name of another live yolotui run that holds it (running on it, or a queued run that claimed it)."""
    held: dict[int, str] = {}
    for entry in index.entries():
        path = Path(entry.path)
        if path.resolve() == me or not lock.is_held(path):
            continue
        status = read_status(path)
        if status is None:
            continue
        if status.state in GPU_HOLDING_STATES:
            if status.device is None:  # a command started without --device (yolotui exec): no GPU claimed
                continue
            try:
                used = set(gpu_indices(status.device))
            except UserError:
                continue
        elif status.state == QUEUED and isinstance(status.queue, dict) and status.queue.get("claimed"):
            used = set(status.queue["claimed"])
        else:
            continue
        for gpu in used & gpus:
            held.setdefault(gpu, entry.name)
    return held


def _earlier_gpu_waiter(gpus: set[int], me: Path, created: float) -> str | None:
    """The name of a live run queued before `created` that waits only for some of `gpus`, if any."""
    from yolotui.runs.runconfig import read_run_config

    for entry in index.entries():
        path = Path(entry.path)
        if path.resolve() == me or not lock.is_held(path):
            continue
        status = read_status(path)
        if status is None or status.state != QUEUED or not isinstance(status.queue, dict):
            continue
        if status.queue.get("waiting_on") != "gpu" or status.queue.get("claimed"):
            continue
        try:
            other_created = float(read_run_config(path).get("created") or 0.0)
        except (UserError, OSError, ValueError):
            continue
        if other_created < created and set(status.queue.get("gpus") or []) & gpus:
            return entry.name
    return None


def _gpu_verdict(free: dict[str, Any], me: Path, created: float, sampler) -> Verdict:
    gpus = list(free.get("gpus") or [0])
    wanted = set(gpus)
    held = _holders(wanted, me)
    if held:
        gpu, name = sorted(held.items())[0]
        return Verdict(False, f"waiting for GPU {gpu}: held by yolotui run {name}", waiting_on="gpu", gpus=gpus)
    ahead = _earlier_gpu_waiter(wanted, me, created)
    if ahead:
        return Verdict(False, f"waiting behind {ahead}, queued earlier for the same GPUs", waiting_on="gpu",
                       gpus=gpus)
    snapshot = sampler.sample()
    if not snapshot.available:
        return Verdict(False, f"waiting for GPU readings: {snapshot.reason}", waiting_on="gpu", gpus=gpus)
    by_index = {g.index: g for g in snapshot.gpus}
    mem = free.get("mem_mib")
    for gpu in gpus:
        reading = by_index.get(gpu)
        if reading is None:
            return Verdict(False, f"GPU {gpu} does not exist here ({len(snapshot.gpus)} GPU(s))", impossible=True)
        if reading.error or reading.memory_total_mb is None or reading.memory_used_mb is None:
            return Verdict(False, f"waiting for GPU {gpu}: {reading.error or 'memory not readable'}",
                           waiting_on="gpu", gpus=gpus)
        free_mib = reading.memory_total_mb - reading.memory_used_mb
        if mem is None and reading.processes:
            return Verdict(False, f"waiting for GPU {gpu} to be idle: {len(reading.processes)} process(es) on it",
                           waiting_on="gpu", gpus=gpus)
        if mem is not None and free_mib < mem:
            return Verdict(False, f"waiting for GPU {gpu}: {free_mib / 1024:.1f} of {mem / 1024:g} GiB free",
                           waiting_on="gpu", gpus=gpus)
    return Verdict(True, "GPU " + ",".join(map(str, gpus)) + " free", gpus=gpus)


def check(spec: dict[str, Any], run_dir: Path, created: float, sampler) -> Verdict:
    """Whether the queued run at `run_dir` may start now. `sampler` is a telemetry GpuSampler (or a fake)."""
    verdict = _after_verdict(spec)
    if verdict is not None:
        return verdict
    free = spec.get("when_free")
    if not free:
        return Verdict(True, "the run it waited for has ended")
    return _gpu_verdict(free, Path(run_dir).resolve(), created, sampler)


@contextlib.contextmanager
def decision_lock() -> Iterator[None]:
    """Exclusive lock over start decisions of all queued runs of this user (held for milliseconds)."""
    home = index.home_dir()
    home.mkdir(parents=True, exist_ok=True)
    fd = os.open(home / QUEUE_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def short_note(message: str, width: int = 28) -> str:
    """A queued run's reason shortened for a table cell: 'GPU 0: held by exp7', 'for a to end'."""
    note = message.removeprefix("queued: ").removeprefix("waiting for ").removeprefix("waiting ")
    note = note.replace("yolotui run ", "")
    return note if len(note) <= width else note[:width - 1] + "…"


def waiting_text(status: RunStatus | None) -> str | None:
    """What a queued run waits for, for lists and the TUI; None when it is not waiting."""
    if status is None or status.state != QUEUED or not isinstance(status.queue, dict):
        return None
    return status.queue.get("reason") or describe(status.queue.get("spec"))
