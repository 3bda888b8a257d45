"""The handshake with a host: is it reachable, which yolotui runs there, what works across the two versions,
and its GPUs (from the remote `yolotui gpu --json`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from yolotui.fleet.hosts import Host
from yolotui.fleet.ssh import NOT_FOUND, QUERY_TIMEOUT_S, call

INSTALL_HINT = "pip install yolotui (or give its path: yolotui hosts add NAME TARGET --yolotui ~/venv/bin/yolotui)"
# The remote commands the fleet relies on, and the yolotui version that first had each.
NEEDS = {"ls --json": (0, 1, 0), "stop": (0, 1, 0), "resume --json": (0, 1, 0), "train --json": (0, 1, 0),
         "watch --json": (0, 1, 0), "attach --wizard": (0, 1, 0)}


@dataclass
class HostInfo:
    """One host as `yolotui hosts ls` shows it."""

    name: str
    target: str
    reachable: bool
    version: str | None = None
    compat: str = ""  # empty when the versions match; else what works and what does not
    gpus: list[dict[str, Any]] = field(default_factory=list)
    gpu_note: str = ""
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return dict(self.__dict__)


def parse_version(text: str) -> tuple[int, ...] | None:
    """(major, minor, patch) from 'yolotui 0.1.0' or '0.1.0.dev3'; None when there is no version."""
    found = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text or "")
    if not found:
        return None
    return tuple(int(part or 0) for part in found.groups())


def compatibility(local: str, remote: str) -> str:
    """'' when the versions match; else a line naming the older side and what works and what does not."""
    mine, theirs = parse_version(local), parse_version(remote)
    if theirs is None:
        return f"remote yolotui reports no version ({remote!r}); the fleet commands may fail there"
    if mine is None or mine == theirs:
        return ""
    missing = sorted(name for name, since in NEEDS.items() if theirs < since)
    if theirs < mine:
        works = "everything the fleet uses works" if not missing else "missing there: " + ", ".join(missing)
        return (f"remote yolotui {remote} is older than this {local}: {works}; upgrade it there for the newest "
                "fixes (pip install -U yolotui)")
    return (f"remote yolotui {remote} is newer than this {local}: ls, watch, stop, resume and train work (their "
            f"--json output is kept compatible); options added after {local} are refused here; upgrade this side "
            "(pip install -U yolotui)")


def probe(host: Host, timeout: float = QUERY_TIMEOUT_S, with_gpus: bool = True) -> HostInfo:
    """Reach `host`, read its yolotui version and (`with_gpus`) its GPUs; never raises, never waits past
    about twice `timeout`."""
    from yolotui import __version__

    info = HostInfo(host.name, host.target, reachable=False)
    reply = call(host, ["--version"], timeout=timeout)
    if reply.link_failed:
        info.error = f"unreachable: {reply.reason()}"
        return info
    info.reachable = True
    if reply.returncode == NOT_FOUND or ("not found" in reply.stderr and reply.returncode != 0):
        info.error = f"yolotui is not installed there ({host.command}: not found); install it: {INSTALL_HINT}"
        return info
    if reply.returncode != 0:
        info.error = f"`{host.command} --version` failed there: {reply.reason()}"
        return info
    info.version = reply.stdout.strip().removeprefix("yolotui").strip() or reply.stdout.strip()
    info.compat = compatibility(__version__, info.version)
    if with_gpus:
        info.gpus, info.gpu_note = read_gpus(host, timeout)
    return info


def read_gpus(host: Host, timeout: float = QUERY_TIMEOUT_S) -> tuple[list[dict[str, Any]], str]:
    """(the host's GPUs from `yolotui gpu --json`, why there are none); never raises."""
    reply = call(host, ["gpu", "--json"], timeout=timeout)
    if reply.returncode != 0:
        return [], f"GPU reading failed: {reply.reason()}"
    try:
        snapshot = json.loads(reply.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError, RecursionError):
        return [], "GPU reading was not JSON"
    if not isinstance(snapshot, dict):
        return [], "GPU reading was not JSON"
    if not snapshot.get("available"):
        return [], str(snapshot.get("reason") or "no GPU")
    gpus = [g for g in snapshot.get("gpus") or [] if isinstance(g, dict)]
    keep = ("index", "name", "memory_used_mb", "memory_total_mb", "utilization_pct", "temperature_c")
    return [{k: g.get(k) for k in keep} for g in gpus], ""


def gpu_text(info: HostInfo) -> str:
    """The GPUs in a few words: '2x H100 (12% util, 30/80 GiB)' or the reason there are none."""
    return gpus_text(info.gpus, info.gpu_note or "-")


def gpus_text(gpus: list[dict[str, Any]], none: str = "no GPU") -> str:
    """'2x H100 (12% util, 30/80 GiB)' for a list of GPU readings; `none` when the list is empty."""
    if not gpus:
        return none
    try:
        names = sorted({str(g.get("name") or "GPU") for g in gpus})
        used = sum(float(g.get("memory_used_mb") or 0) for g in gpus) / 1024
        total = sum(float(g.get("memory_total_mb") or 0) for g in gpus) / 1024
        utils = [float(g["utilization_pct"]) for g in gpus if g.get("utilization_pct") is not None]
    except (TypeError, ValueError):  # a reading that is not numbers: said, not raised
        return f"{len(gpus)} GPUs (unreadable readings)"
    util = f"{sum(utils) / len(utils):.0f}% util, " if utils else ""
    return f"{len(gpus)}x {'/'.join(names)} ({util}{used:.0f}/{total:.0f} GiB)"
