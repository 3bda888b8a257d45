"""The home screen's GPU strip: every GPU at a glance (temperature, memory, utilisation, power against its cap,
throttling in words, and which run holds how much of it), or the CPU/RAM line on a machine without a GPU.

It folds to the room it has: one line per GPU when they fit, two GPUs a line when they do not, and one summary
line (the hottest, the busiest, who is throttled) when even that would not fit; within a line the details
shrink with the width (the GPU's name, the memory bar, the amounts go first).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from rich.text import Text

from yolotui.tui.widgets.panel_base import _PANEL_CSS_CLASSES, TEMP_HOT_C, TEMP_WARN_C, Panel
from yolotui.tui.widgets.sparkline import bar

WIDE, MEDIUM, NARROW = 2, 1, 0  # how much of a GPU a cell has room for


def max_strip_lines(screen_height: int) -> int:
    """How many lines the strip may take on a screen this tall (the runs table keeps the most)."""
    if screen_height < 16:
        return 1
    return max(2, min(8, (screen_height - 12) // 3))


def detail_for(width: int) -> int:
    """The detail level a cell `width` columns wide can hold."""
    return WIDE if width >= 100 else MEDIUM if width >= 56 else NARROW


class GpuStrip(Panel):
    """One line per GPU (or two GPUs a line, or a summary), refreshed with each shared sample."""

    DEFAULT_CSS = ("GpuStrip { height: auto; max-height: 8; padding: 0 1; background: $boost; }"
                   + _PANEL_CSS_CLASSES.format(name="GpuStrip"))

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("reading GPUs…", id=id)
        self.snapshot: Any = None
        self.owners: Mapping[int, str] = {}
        self.devices: Mapping[int, list[str]] = {}

    def show(self, snapshot: Any, owners: Mapping[int, str], devices: Mapping[int, list[str]] | None = None) -> None:
        """Paint `snapshot`; `owners` maps a process id to its run's name, `devices` a GPU index to the live
        runs that asked for it (used where the GPU's process list does not show them, as in containers)."""
        self.snapshot, self.owners, self.devices = snapshot, dict(owners), dict(devices or {})
        self._paint()

    def on_resize(self) -> None:
        super().on_resize()
        if self.snapshot is not None:
            self._paint()

    def _paint(self) -> None:
        width = max(20, self.content_size.width or (self.app.size.width - 2))
        lines = strip_lines(self, self.snapshot, self.owners, self.devices, width,
                            max_strip_lines(self.screen.size.height or self.app.size.height))
        self.set_text(Text("\n", no_wrap=True, overflow="ellipsis").join(lines))


def strip_lines(panel: Panel, snapshot: Any, owners: Mapping[int, str], devices: Mapping[int, list[str]],
                width: int, max_lines: int) -> list[Text]:
    """The strip's lines for `snapshot` in `width` columns and at most `max_lines` lines."""
    gpus = list(getattr(snapshot, "gpus", None) or [])
    if not getattr(snapshot, "available", False) or not gpus:
        return [host_line(panel, snapshot, width)]
    count = len(gpus)
    if count <= max_lines:
        return [_fit(gpu_cell(panel, g, owners, devices, detail_for(width)), width) for g in gpus]
    cell_w = (width - 3) // 2
    if math.ceil(count / 2) <= max_lines:
        lines = []
        for i in range(0, count, 2):
            line = _fit(gpu_cell(panel, gpus[i], owners, devices, detail_for(cell_w)), cell_w, pad=True)
            if i + 1 < count:
                line.append(" │ ", panel.style_for("muted"))
                line.append_text(_fit(gpu_cell(panel, gpus[i + 1], owners, devices, detail_for(cell_w)), cell_w))
            lines.append(line)
        return lines
    return [_fit(summary_line(panel, gpus, owners, devices), width)]


def _fit(text: Text, width: int, pad: bool = False) -> Text:
    text.truncate(width, overflow="ellipsis", pad=pad)
    return text


def _temp_kind(gpu: Any) -> str:
    temp = getattr(gpu, "temperature_c", None)
    if temp is None:
        return "muted"
    return "bad" if getattr(gpu, "hot", False) or temp >= TEMP_HOT_C else "warn" if temp >= TEMP_WARN_C else "good"


def _throttle_words(gpu: Any) -> list[str]:
    """What slows the GPU down, in words ('thermal', 'power cap'); [] when it runs free or it is not known."""
    if not getattr(gpu, "throttled", None):
        return []
    from yolotui.telemetry.clocks import reason_groups

    groups = reason_groups(getattr(gpu, "throttle_mask", None))
    if not groups and getattr(gpu, "throttle_reasons", None):
        groups = list(gpu.throttle_reasons)
    return groups or ["slowed"]


def gpu_users(gpu: Any, owners: Mapping[int, str], devices: Mapping[int, list[str]]) -> list[tuple[str, float | None]]:
    """[(who, MiB or None)] on the GPU: each run found by its processes, then the live runs that asked for this
    GPU but whose processes NVML does not list, then 'other' for processes of no known run."""
    found: dict[str, float | None] = {}
    other = 0.0
    for pid, mib in getattr(gpu, "processes", None) or []:
        name = owners.get(pid)
        if name is None:
            other += mib or 0.0
            continue
        found[name] = (found.get(name) or 0.0) + (mib or 0.0)
    for name in devices.get(getattr(gpu, "index", -1), []):
        found.setdefault(name, None)
    users = list(found.items())
    if other:
        users.append(("other", other))
    return users


def gpu_cell(panel: Panel, gpu: Any, owners: Mapping[int, str], devices: Mapping[int, list[str]],
             detail: int) -> Text:
    """One GPU: 'GPU0 H200  71°C  mem ███░░ 59/140G  util 93%  512/700W  throttled: thermal  exp7 39G 28%'."""
    text = Text(no_wrap=True, overflow="ellipsis")
    index = getattr(gpu, "index", "?")
    text.append(f"GPU{index}" if detail else f"{index}", "bold")
    if detail == WIDE and getattr(gpu, "name", None):
        text.append(f" {str(gpu.name).removeprefix('NVIDIA ')[:12]}", panel.style_for("label"))
    if getattr(gpu, "error", None):
        text.append(f" {gpu.error}", panel.style_for("bad"))
        return text
    gap = "  " if detail == WIDE else " "
    temp = getattr(gpu, "temperature_c", None)
    text.append(f"{gap}{temp:.0f}°C" if temp is not None else f"{gap}--°C", panel.style_for(_temp_kind(gpu)))
    used, total = getattr(gpu, "memory_used_mb", None), getattr(gpu, "memory_total_mb", None)
    mem_kind = "warn" if getattr(gpu, "memory_high", False) else "info"
    if used is not None and total:
        if detail == WIDE:
            text.append("  mem ", panel.style_for("label"))
            text.append(bar(used / total, 8), panel.style_for(mem_kind))
            text.append(f" {used / 1024:.0f}/{total / 1024:.0f}G")
        else:
            text.append(f"{gap}mem " if detail else " m", panel.style_for("label"))
            text.append(f"{used / total * 100:.0f}%", panel.style_for(mem_kind))
    util = getattr(gpu, "utilization_pct", None)
    text.append(f"{gap}util " if detail else " u", panel.style_for("label"))
    text.append(f"{util:.0f}%" if util is not None else "--%")
    power, cap = getattr(gpu, "power_w", None), getattr(gpu, "power_limit_w", None)
    if power is not None:
        text.append(gap)
        text.append(f"{power:.0f}" + (f"/{cap:.0f}" if cap and detail else "") + "W",
                    panel.style_for("warn" if cap and power >= 0.97 * cap else "label"))
    words = _throttle_words(gpu)
    if words:
        text.append(("  throttled: " if detail == WIDE else " ⚠") + ", ".join(words), panel.style_for("warn"))
    users = gpu_users(gpu, owners, devices)
    if not users:
        idle = util is not None and util < 5
        text.append(f"{gap}free" if idle else "", panel.style_for("muted"))
    for name, mib in users:
        text.append(gap)
        text.append(name, panel.style_for("muted" if name == "other" else "share"))
        if mib and detail and total:
            amount = f" {mib / 1024:.0f}G" if detail == WIDE else ""
            text.append(f"{amount} {mib / total * 100:.0f}%", panel.style_for("label"))
    return text


def summary_line(panel: Panel, gpus: Sequence[Any], owners: Mapping[int, str],
                 devices: Mapping[int, list[str]]) -> Text:
    """All GPUs in one line: count, temperature range, mean utilisation, memory and power totals, the throttled
    and lost ones by number, and which runs hold which GPUs."""
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"{len(gpus)} GPUs", "bold")
    live = [g for g in gpus if not getattr(g, "error", None)]
    temps = [g.temperature_c for g in live if getattr(g, "temperature_c", None) is not None]
    if temps:
        hottest = max(live, key=lambda g: getattr(g, "temperature_c", None) or -1)
        text.append(f"  {min(temps):.0f}–{max(temps):.0f}°C", panel.style_for(_temp_kind(hottest)))
    utils = [g.utilization_pct for g in live if getattr(g, "utilization_pct", None) is not None]
    if utils:
        text.append("  util ", panel.style_for("label"))
        text.append(f"{sum(utils) / len(utils):.0f}%")
    used = sum(getattr(g, "memory_used_mb", None) or 0.0 for g in live)
    total = sum(getattr(g, "memory_total_mb", None) or 0.0 for g in live)
    if total:
        text.append("  mem ", panel.style_for("label"))
        text.append(f"{used / 1024:.0f}/{total / 1024:.0f}G")
    throttled = [f"{g.index} {', '.join(_throttle_words(g))}" for g in live if _throttle_words(g)]
    if throttled:
        text.append("  throttled: GPU" + "; GPU".join(throttled), panel.style_for("warn"))
    lost = [str(g.index) for g in gpus if getattr(g, "error", None)]
    if lost:
        text.append("  lost: GPU" + ",".join(lost), panel.style_for("bad"))
    holders: dict[str, list[str]] = {}
    for gpu in live:
        for name, _ in gpu_users(gpu, owners, devices):
            if name != "other":
                holders.setdefault(name, []).append(str(gpu.index))
    for name, indices in holders.items():
        text.append(f"  {name}", panel.style_for("share"))
        text.append(f" GPU{','.join(indices)}", panel.style_for("label"))
    return text


def host_line(panel: Panel, snapshot: Any, width: int) -> Text:
    """A machine without a usable GPU: why, then CPU, RAM and swap."""
    text = Text(no_wrap=True, overflow="ellipsis")
    if snapshot is None:
        text.append("reading GPUs…", panel.style_for("muted"))
        return text
    reason = str(getattr(snapshot, "reason", None) or "no NVIDIA GPU")
    host = getattr(snapshot, "host", None)
    cpu = getattr(host, "cpu_pct", None)
    text.append("cpu ", panel.style_for("label"))
    text.append(f"{cpu:.0f}%" if cpu is not None else "--")
    for label, used_key, total_key in (("ram", "mem_used_mb", "mem_total_mb"),
                                       ("swap", "swap_used_mb", "swap_total_mb")):
        used, total = getattr(host, used_key, None), getattr(host, total_key, None)
        if used is None or not total:
            continue
        text.append(f"  {label} ", panel.style_for("label"))
        if width >= 70:
            text.append(bar(used / total, 8), panel.style_for("warn" if used / total >= 0.9 else "info"))
            text.append(" ")
        text.append(f"{used / 1024:.1f}/{total / 1024:.0f}G")
    text.append("  ")
    text.append(reason, panel.style_for("muted"))
    return _fit(text, width)
