"""`yolotui hosts add NAME [SSH_TARGET] [--yolotui CMD]`, `hosts ls [--json]`, `hosts rm NAME`: the machines
this yolotui reaches over ssh (kept in settings.yaml; see yolotui.fleet.hosts and docs/fleet.md)."""

from __future__ import annotations

import argparse
import json
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The add / ls / rm subcommands."""
    sub = parser.add_subparsers(dest="hosts_command", metavar="ACTION", required=True, help="add, ls or rm")
    add = sub.add_parser("add", help="add (or replace) a host", description="add (or replace) a host")
    add.add_argument("name", metavar="NAME", help="the host's name here (gpu1, lab ...)")
    add.add_argument("target", nargs="?", default=None, metavar="SSH_TARGET",
                     help="what ssh connects to: a ~/.ssh/config alias or user@host (default: NAME)")
    add.add_argument("--yolotui", dest="yolotui_command", default=None, metavar="CMD",
                     help="how to run yolotui there (default: yolotui; e.g. ~/venv/bin/yolotui)")
    add.add_argument("--no-check", action="store_true", help="store it without connecting now")
    ls = sub.add_parser("ls", help="every host: reachable, yolotui version, GPUs",
                        description="every host: reachable, yolotui version, GPUs (queried concurrently)")
    ls.add_argument("--json", action="store_true", help="print a JSON list")
    ls.add_argument("--timeout", type=float, default=None, metavar="S", help="seconds per host (default 20)")
    rm = sub.add_parser("rm", help="forget a host (nothing on it is touched)", description="forget a host")
    rm.add_argument("name", metavar="NAME", help="the host to forget")


def run(args: argparse.Namespace) -> int:
    """Dispatch to add, ls or rm."""
    from yolotui.fleet import hosts

    if args.hosts_command == "rm":
        hosts.remove_host(args.name)
        print(f"forgot host {args.name}")
        return 0
    if args.hosts_command == "add":
        host = hosts.add_host(args.name, args.target, args.yolotui_command)
        print(f"added host {host.name} (ssh {host.target})")
        if args.no_check:
            return 0
        from yolotui.fleet.probe import probe

        info = probe(host, with_gpus=False)
        for line in _info_lines(info):
            print(line, file=sys.stderr)
        return 0
    return _list(args)


def _info_lines(info) -> list[str]:
    lines = []
    if info.error:
        lines.append(f"{info.name}: {info.error}")
    elif info.version:
        lines.append(f"{info.name}: reachable, yolotui {info.version}")
    if info.compat:
        lines.append(f"{info.name}: {info.compat}")
    return lines


def _list(args: argparse.Namespace) -> int:
    from concurrent.futures import ThreadPoolExecutor

    from yolotui import __version__
    from yolotui.commands._runfmt import emit, table
    from yolotui.fleet.hosts import LOCAL, load_hosts
    from yolotui.fleet.probe import HostInfo, gpu_text, probe
    from yolotui.fleet.ssh import QUERY_TIMEOUT_S

    configured = load_hosts(strict=True)
    timeout = args.timeout or QUERY_TIMEOUT_S
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(configured)))) as pool:
        infos = list(pool.map(lambda h: probe(h, timeout=timeout), configured))
    local = HostInfo(LOCAL, "-", True, __version__)
    local.gpus, local.gpu_note = _local_gpus()
    infos.insert(0, local)
    if args.json:
        emit(json.dumps([info.to_dict() for info in infos], indent=2))
        return 0
    rows = [(i.name, i.target, "yes" if i.reachable else "NO", i.version or "-", gpu_text(i)) for i in infos]
    emit(table(("HOST", "TARGET", "REACHABLE", "YOLOTUI", "GPUS"), rows))
    for info in infos:
        for line in _info_lines(info) if (info.error or info.compat) else []:
            print(line, file=sys.stderr)
    if not configured:
        print("no hosts yet: add one with `yolotui hosts add NAME SSH_TARGET`", file=sys.stderr)
    return 0


def _local_gpus() -> tuple[list, str]:
    try:
        from yolotui.telemetry.gpu import GpuSampler

        sampler = GpuSampler()
        try:
            snapshot = sampler.sample().to_dict()
        finally:
            sampler.close()
    except Exception as exc:  # no NVML here: said, not raised
        return [], f"no NVIDIA GPU ({type(exc).__name__})"
    if not snapshot.get("available"):
        return [], str(snapshot.get("reason") or "no GPU")
    keep = ("index", "name", "memory_used_mb", "memory_total_mb", "utilization_pct", "temperature_c")
    return [{k: g.get(k) for k in keep} for g in snapshot.get("gpus") or []], ""
