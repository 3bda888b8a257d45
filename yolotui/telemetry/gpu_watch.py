"""The supervisor's GPU watcher: `python -m yolotui.telemetry.gpu_watch --interval S [--pid PID]`.

A child process of the supervisor, one per attempt, so that no NVML call ever runs inside the supervisor
(which must stay single-threaded and never wait): every INTERVAL seconds it takes a GpuSnapshot (the
trainer PID's process tree marked as the run's), drains the Xid events (telemetry/xid.py), and writes one JSON
object a line to stdout: the snapshot's dict plus `xids` (the events since the previous line) and
`xid_source` ('nvml', 'kernel log' or null).

It stops when its stdin reaches end of file (the supervisor closed it at the end of the attempt, or died),
after one last sample so that an Xid logged as the trainer crashed is still reported, or when its stdout is
gone. Each NVML reading runs under the guard's time limit, so a hung driver delays a line by about a second,
never more.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import sys
import time
from typing import Any

from yolotui.telemetry.gpu import GpuSampler
from yolotui.telemetry.host import process_tree_pids
from yolotui.telemetry.xid import XidWatcher

DEFAULT_INTERVAL_S = 5.0


def snapshot_line(sampler: GpuSampler, watcher: XidWatcher | None, pid: int | None) -> tuple[dict[str, Any],
                                                                                          XidWatcher | None]:
    """One sample as a dict with the Xids since the last one; starts the Xid watcher once NVML is up."""
    snapshot = sampler.sample(process_tree_pids(pid) if pid else ())
    if watcher is None and sampler.ready:
        watcher = XidWatcher(sampler.nvml, sampler.call)
        handles: dict[int, Any] = {}
        for gpu in snapshot.gpus:
            if gpu.error:
                continue
            try:
                handles[gpu.index] = sampler.call(sampler.nvml.nvmlDeviceGetHandleByIndex, gpu.index)
            except Exception:  # noqa: BLE001 - the GPU went away in between
                continue
        watcher.start(handles, {gpu.index: gpu.pci_bus_id for gpu in snapshot.gpus})
    elif watcher is not None:
        watcher.update_bus_ids({gpu.index: gpu.pci_bus_id for gpu in snapshot.gpus if gpu.pci_bus_id})
    data = snapshot.to_dict()
    data["xids"] = [event.to_dict() for event in watcher.poll()] if watcher is not None else []
    data["xid_source"] = watcher.source if watcher is not None else None
    return data, watcher


def _write(data: dict[str, Any]) -> bool:
    try:
        sys.stdout.write(json.dumps(data, default=str) + "\n")
        sys.stdout.flush()
        return True
    except (BrokenPipeError, OSError, ValueError):
        return False


def main(argv: list[str] | None = None) -> int:
    """Sample until stdin closes (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m yolotui.telemetry.gpu_watch")
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_S)
    parser.add_argument("--pid", type=int, default=0, help="the trainer's pid: its process tree is the run's")
    args = parser.parse_args(argv)
    interval = max(0.05, args.interval)
    parent = os.getppid()
    sampler = GpuSampler()
    watcher: XidWatcher | None = None
    stdin = sys.stdin.fileno()
    try:
        while True:
            data, watcher = snapshot_line(sampler, watcher, args.pid)
            if not _write(data):
                return 0
            deadline = time.monotonic() + interval
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                readable, _, _ = select.select([stdin], [], [], left)
                if readable and not os.read(stdin, 4096) or os.getppid() != parent:  # closed: a last sample
                    data, watcher = snapshot_line(sampler, watcher, args.pid)
                    _write(data)
                    return 0
    except KeyboardInterrupt:
        return 0
    finally:
        if watcher is not None:
            watcher.close()
        sampler.close()


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # a reading still stuck in the driver must not hold the exit
