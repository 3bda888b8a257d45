"""`yolotui gpu [--json] [--watch] [--interval S]`: GPU temperature, memory, utilisation, power, processes,
throttle reasons and clocks against their maxima, ECC counts, PCIe link and energy."""

from __future__ import annotations

import argparse
import json
import sys
import time

from yolotui.errors import UserError
from yolotui.telemetry.gpu_text import detail_lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The gpu command's flags."""
    parser.add_argument("--json", action="store_true", help="print the snapshot as JSON (one object a line)")
    parser.add_argument("--watch", action="store_true", help="refresh every --interval seconds until Ctrl-C")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between readings with --watch")
    parser.add_argument("--count", type=int, default=0, help="with --watch: stop after this many readings")


def _num(value, fmt: str, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:{fmt}}{unit}"


def render(snapshot) -> str:
    """The snapshot as a few lines of plain text, hot/high readings flagged with '!'."""
    host = snapshot.host
    lines = []
    if not snapshot.available:
        lines.append(f"GPU: {snapshot.reason}")
    else:
        if snapshot.driver_version:
            lines.append(f"driver {snapshot.driver_version}")
        for gpu in snapshot.gpus:
            if gpu.error:
                lines.append(f"[{gpu.index}] {gpu.error}")
                continue
            temp = _num(gpu.temperature_c, ".0f", "°C") + ("!" if gpu.hot else "")
            mem = f"{_num(gpu.memory_used_mb, '.0f')}/{_num(gpu.memory_total_mb, '.0f')} MiB" + (
                "!" if gpu.memory_high else "")
            power = f"{_num(gpu.power_w, '.0f')}/{_num(gpu.power_limit_w, '.0f')} W"
            lines.append(f"[{gpu.index}] {gpu.name or 'n/a'}  {temp}  mem {mem}  util "
                         f"{_num(gpu.utilization_pct, '.0f', '%')}  power {power}  fan {_num(gpu.fan_pct, '.0f', '%')}")
            lines += [f"      {line}" for line in detail_lines(gpu)]  # throttling, clocks, ECC, PCIe, energy
            for pid, used in gpu.processes:
                mark = " (run)" if pid in gpu.own_pids else ""
                lines.append(f"      pid {pid}  {_num(used, '.0f', ' MiB')}{mark}")
    lines.append(f"host: cpu {_num(host.cpu_pct, '.0f', '%')}  mem {_num(host.mem_used_mb, '.0f')}/"
                 f"{_num(host.mem_total_mb, '.0f')} MiB")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    """Print one snapshot, or keep printing with --watch."""
    from yolotui.telemetry.gpu import GpuSampler

    if args.interval <= 0:
        raise UserError("--interval must be a positive number of seconds")
    sampler = GpuSampler()
    shown = 0
    try:
        while True:
            snapshot = sampler.sample()
            if args.json:
                sys.stdout.write(json.dumps(snapshot.to_dict()) + "\n")
            else:
                if args.watch and sys.stdout.isatty():
                    sys.stdout.write("\x1b[H\x1b[2J")
                sys.stdout.write(render(snapshot))
            sys.stdout.flush()
            shown += 1
            if not args.watch or (args.count and shown >= args.count):
                return 0
            time.sleep(args.interval)
    finally:
        sampler.close()
