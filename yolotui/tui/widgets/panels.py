"""The dashboard's text panels: run header, progress, GPU, checkpoints, restart history.

Each panel is a Static that turns a plain snapshot (RunView, GPU samples) into Rich text; colours come from
component classes so they follow the theme.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from rich.text import Text

from yolotui import formatting
from yolotui.formatting import age as format_age
from yolotui.formatting import duration as format_duration
from yolotui.formatting import size as format_size
from yolotui.runs.layout import LIVE_STATES
from yolotui.runs.status import elapsed_seconds
from yolotui.telemetry.history import downsample
from yolotui.tui.runview import RunView
from yolotui.tui.widgets import gpu_health
from yolotui.tui.widgets.panel_base import (
    _PANEL_CSS_CLASSES,
    STATE_CLASS,
    TEMP_HOT_C,
    TEMP_WARN_C,
    VERDICT_CLASS,
    Panel,
)
from yolotui.tui.widgets.sparkline import bar, sparkline


class RunHeader(Panel):
    """One line: name, state, attempt, device, elapsed (and, for a queued run, what it waits for)."""

    DEFAULT_CSS = "RunHeader { height: 1; padding: 0 1; background: $boost; }" + _PANEL_CSS_CLASSES.format(
        name="RunHeader")

    def show(self, view: RunView, now: float) -> None:
        status = view.status
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(view.name, "bold")
        text.append("  ")
        text.append(view.state, self.style_for(STATE_CLASS.get(view.state, "muted")))
        if status is not None:
            attempts = f"{status.attempt}/{status.max_attempts}" if status.max_attempts else str(status.attempt)
            text.append("  attempt ", self.style_for("label"))
            text.append(attempts)
            text.append("  device ", self.style_for("label"))
            text.append(status.device or "--")
            elapsed = elapsed_seconds(status, now, view.state in LIVE_STATES)
            text.append("  elapsed ", self.style_for("label"))
            text.append(format_duration(elapsed))
        if view.slurm:
            from yolotui.runs.slurm_state import short_text

            text.append("  slurm ", self.style_for("label"))
            text.append(short_text(view.slurm))
        elif view.state == "queued" and status is not None and status.message:
            text.append("  " + status.message, self.style_for("info"))  # what the queued run waits for
        if view.problems:
            text.append("  ⚠ " + "; ".join(view.problems), self.style_for("warn"))
        self.set_text(text)


class ProgressPanel(Panel):
    """Two lines: the epoch in progress ('epoch 6 of 50') and the whole run ('5/50' epochs done), in the one
    epoch numbering of yolotui.formatting; ETA and images/s only while the run is live, and `validating` (with
    the epoch's training rate) once every batch of the epoch is done and its epoch event has not come yet."""

    DEFAULT_CSS = "ProgressPanel { height: 2; padding: 0 1; }" + _PANEL_CSS_CLASSES.format(name="ProgressPanel")

    def show(self, view: RunView) -> None:
        width = max(10, self.content_size.width or 78)
        bar_w = max(5, width - 52)
        text = Text(no_wrap=True, overflow="ellipsis")
        live = view.state in LIVE_STATES
        if view.state == "queued":  # nothing to measure yet: what it waits for
            status = view.status
            text.append("queued: ", self.style_for("label"))
            waits = str(getattr(status, "message", None) or "waiting for its turn").removeprefix("queued: ")
            text.append(waits, self.style_for("info"))
            text.append("\nit starts by itself as soon as that is free",
                        self.style_for("muted"))
            self.set_text(text)
            return
        epoch_label = formatting.epoch_in_progress(view.epoch, view.epochs, unknown="epoch --")
        text.append(f"{epoch_label:<15} ")
        frac = view.epoch_fraction()
        text.append(bar(frac, bar_w), self.style_for("info"))
        text.append(f" {_pct(frac)}")
        if view.batches:
            text.append(f"  {view.batch}/{view.batches}", self.style_for("label"))
        if live and view.validating:
            text.append("  validating", self.style_for("info"))  # every batch done; the epoch event follows
            if view.imgs_per_s is not None:
                text.append(f"  trained at {formatting.speed(view.imgs_per_s)}")
        elif live:
            text.append(f"  eta {format_duration(view.epoch_eta())}")
            if view.imgs_per_s is not None:
                text.append(f"  {formatting.speed(view.imgs_per_s)}")
        text.append("\n")
        overall = view.overall_fraction()
        text.append("overall ", self.style_for("label"))
        text.append(f"{formatting.epochs(view.finished_epochs, view.epochs):<7} ")
        text.append(bar(overall, bar_w), self.style_for("good"))
        text.append(f" {_pct(overall)}")
        if live:
            text.append(f"  eta {format_duration(view.overall_eta())}")
        if view.last_problem:
            text.append("  " + view.last_problem, self.style_for("warn"))
        self.set_text(text)


def _pct(fraction: float | None) -> str:
    return "  --%" if fraction is None else f"{fraction * 100:4.0f}%"


class CheckpointPanel(Panel):
    """last.pt and best.pt: epoch, age, size, verdict; then the restart history."""

    DEFAULT_CSS = "CheckpointPanel { height: auto; }" + _PANEL_CSS_CLASSES.format(name="CheckpointPanel")

    def show(self, view: RunView, now: float) -> None:
        text = Text(no_wrap=True, overflow="ellipsis")
        for index, facts in enumerate(view.checkpoints):
            if index:
                text.append("\n")
            text.append(f"{facts.name:<8}", "bold")
            if facts.verdict == "missing" and not view.finished_epochs and view.state != "failed":
                # A new run: nothing is wrong, its first checkpoint comes with its first epoch's end.
                text.append("no checkpoint yet (first at the end of epoch 1)" if index == 0 else "none yet",
                            self.style_for("muted"))
                continue
            text.append(facts.verdict, self.style_for(VERDICT_CLASS.get(facts.verdict, "muted")))
            if facts.verdict == "missing":
                continue
            epoch = formatting.epochs(facts.epoch, facts.total_epochs)
            age = format_age(now - facts.mtime) if facts.mtime else "--"
            text.append(f"\n  ep {epoch}  {age} ago  {format_size(facts.size)}", self.style_for("label"))
            if facts.verdict in ("corrupt", "incomplete", "unknown") and facts.reasons:
                text.append("\n  " + facts.reasons[0], self.style_for("warn"))
        self.set_text(text)


class RestartPanel(Panel):
    """The supervisor's attempts, newest last: number, exit, failure class, remedy; and a mirrored run's copies."""

    DEFAULT_CSS = "RestartPanel { height: auto; }" + _PANEL_CSS_CLASSES.format(name="RestartPanel")

    def show(self, view: RunView) -> None:
        attempts = list(view.status.attempts) if view.status else []
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append("restarts ", self.style_for("label"))
        if len(attempts) <= 1:
            text.append("none")
        for item in attempts[-4:] if len(attempts) > 1 else []:
            if not isinstance(item, dict):
                continue
            text.append(f"\n#{item.get('attempt', '?')} ")
            failure = item.get("failure_class")
            code = item.get("exit_code")
            signal = item.get("exit_signal")
            outcome = failure or ("ok" if code == 0 else f"exit {code}" if code is not None else
                                  f"signal {signal}" if signal else "running")
            text.append(str(outcome), self.style_for("bad" if failure else "good" if code == 0 else "muted"))
            if item.get("remedy"):
                text.append(f" → {item['remedy']}", self.style_for("label"))
        mirror = view.status.mirror if view.status else None
        if mirror:  # a mirrored run: how its copies fare (yolotui/mirror/driver.py)
            from yolotui.mirror.driver import FAILING, describe

            text.append("\nmirror ", self.style_for("label"))
            text.append(describe(mirror) or "", self.style_for("bad" if mirror.get("state") == FAILING else "muted"))
        self.set_text(text)


class GpuPanel(Panel):
    """Per GPU: temperature (with thresholds), memory bar with the run's share, utilisation, power, sparklines,
    throttling with the clock against its maximum, ECC and PCIe trouble; then the run's GPU summary and why it
    is slow (tui/widgets/gpu_health.py).

    Without a usable NVIDIA GPU it says so and shows the host's CPU and RAM instead.
    """

    DEFAULT_CSS = "GpuPanel { height: auto; }" + _PANEL_CSS_CLASSES.format(name="GpuPanel")

    def show(self, history: Sequence[Any], run_pids: set[int], summary: Any = None, loop: Any = None) -> None:
        """Paint the latest sample (and its history); `summary` is the run's GPU summary of its current attempt,
        `loop` the last epoch's loop timings."""
        width = max(20, self.content_size.width or 30)
        text = Text(no_wrap=True, overflow="ellipsis")
        if not history:
            text.append("sampling…", self.style_for("muted"))
            self.set_text(text)
            return
        latest = history[-1]
        if not getattr(latest, "available", False) or not getattr(latest, "gpus", None):
            self._host(text, history, width)
            gpu_health.append_run(self, text, summary, loop, width)
            self.set_text(text)
            return
        for index, gpu in enumerate(latest.gpus):
            if index:
                text.append("\n")
            self._gpu(text, gpu, [_gpu_at(s, gpu.index) for s in history], run_pids, width)
        gpu_health.append_run(self, text, summary, loop, width)  # throttled share, Xids, data-bound verdict
        self._memory(text, getattr(latest, "host", None), width)  # the OOM killer is a top cause of silent deaths
        self.set_text(text)

    def _memory(self, text: Text, host: Any, width: int) -> None:
        """Host RAM and swap bars, each with the run's own share."""
        for label, used_key, total_key, own_key in (("ram ", "mem_used_mb", "mem_total_mb", "run_rss_mb"),
                                                    ("swap", "swap_used_mb", "swap_total_mb", "run_swap_mb")):
            used, total = getattr(host, used_key, None), getattr(host, total_key, None)
            own = getattr(host, own_key, None) or 0.0
            text.append(f"\n {label} ", self.style_for("label"))
            if used is None or not total:
                text.append("none" if label == "swap" and total == 0 else "N/A", self.style_for("muted"))
                continue
            amounts = f" {used / 1024:.1f}/{total / 1024:.0f}G"
            share = f" run {own / 1024:.1f}G" if own else ""
            bar_w = max(4, width - 6 - len(amounts) - len(share))  # the whole line fits the panel
            own_cells = round(min(own, used) / total * bar_w)
            used_cells = max(own_cells, round(used / total * bar_w))
            text.append("▓" * own_cells, self.style_for("share"))
            text.append("█" * (used_cells - own_cells), self.style_for("warn" if used / total >= 0.9 else "info"))
            text.append("░" * (bar_w - used_cells), self.style_for("muted"))
            text.append(amounts)
            if share:
                text.append(share, self.style_for("share"))

    def _gpu(self, text: Text, gpu: Any, series: list[Any], run_pids: set[int], width: int) -> None:
        text.append(f"GPU{gpu.index} ", "bold")
        text.append(str(gpu.name or ""), self.style_for("label"))
        if getattr(gpu, "error", None):  # fell off the bus, or not answering
            text.append(f"\n {gpu.error}", self.style_for("bad"))
            return
        temp = gpu.temperature_c
        kind = "muted" if temp is None else "bad" if (gpu.hot or temp >= TEMP_HOT_C) else (
            "warn" if temp >= TEMP_WARN_C else "good")
        spark_w = max(4, width - 16)
        text.append("\n temp ", self.style_for("label"))
        text.append(f"{temp:>4.0f}°C " if temp is not None else "  N/A  ", self.style_for(kind))
        text.append(sparkline(downsample([_attr(r, "temperature_c") for r in series], spark_w), spark_w, 20, 100),
                    self.style_for(kind))
        used, total = gpu.memory_used_mb, gpu.memory_total_mb
        own = sum(mb for pid, mb in (gpu.processes or []) if pid in run_pids and mb)
        text.append("\n mem  ", self.style_for("label"))
        if used is not None and total:
            bar_w = max(4, width - 24)
            own_cells = round(min(own, used) / total * bar_w)
            used_cells = max(own_cells, round(used / total * bar_w))
            mem_kind = "warn" if gpu.memory_high else "info"
            text.append("▓" * own_cells, self.style_for("share"))
            text.append("█" * (used_cells - own_cells), self.style_for(mem_kind))
            text.append("░" * (bar_w - used_cells), self.style_for("muted"))
            text.append(f" {used / 1024:.1f}/{total / 1024:.0f}G")
            if own:
                text.append(f"\n      run {own / 1024:.1f}G", self.style_for("share"))
        else:
            text.append("N/A", self.style_for("muted"))
        util = gpu.utilization_pct
        text.append("\n util ", self.style_for("label"))
        text.append(f"{util:>4.0f}%  " if util is not None else "  N/A  ")
        text.append(sparkline(downsample([_attr(r, "utilization_pct") for r in series], spark_w), spark_w, 0, 100),
                    self.style_for("info"))
        power, limit = gpu.power_w, gpu.power_limit_w
        text.append("\n power ", self.style_for("label"))
        if power is not None:
            text.append(f"{power:.0f}" + (f"/{limit:.0f}" if limit else "") + " W")
        else:
            text.append("N/A", self.style_for("muted"))
        gpu_health.append_reading(self, text, gpu, width)

    def _host(self, text: Text, history: Sequence[Any], width: int) -> None:
        latest = history[-1]
        reason = str(getattr(latest, "reason", None) or "")
        # Wrapped to the panel's width: a narrow panel must not cut the reason off.
        if reason.startswith("no NVIDIA GPU"):
            lines = textwrap.wrap(reason, max(10, width)) or ["no NVIDIA GPU"]
            text.append(lines[0], self.style_for("warn"))
            for line in lines[1:]:
                text.append(f"\n{line}", self.style_for("warn"))
        else:
            text.append("no NVIDIA GPU", self.style_for("warn"))
            for line in textwrap.wrap(reason, max(10, width - 1)):
                text.append(f"\n {line}", self.style_for("muted"))
        host = getattr(latest, "host", None)
        cpu = getattr(host, "cpu_pct", None)
        spark_w = max(4, width - 12)
        text.append("\n cpu ", self.style_for("label"))
        text.append(f"{cpu:>4.0f}% " if cpu is not None else " N/A  ")
        text.append(sparkline(downsample([getattr(getattr(s, "host", None), "cpu_pct", None) for s in history],
                                         spark_w), spark_w, 0, 100), self.style_for("info"))
        self._memory(text, host, width)


def _gpu_at(snapshot: Any, index: int) -> Any:
    for gpu in getattr(snapshot, "gpus", None) or []:
        if gpu.index == index:
            return gpu
    return None


def _attr(reading: Any, name: str) -> float | None:
    return None if reading is None else getattr(reading, name, None)


class LogTail(Panel):
    """The last lines of train.log that fit, newest at the bottom.

    A fixed-size text panel rather than a scrolling Log: appending never changes the layout, so following
    a chatty trainer costs one partial repaint, not a relayout of the screen (`yolotui logs` has the rest).
    """

    DEFAULT_CSS = "LogTail { height: 1fr; }" + _PANEL_CSS_CLASSES.format(name="LogTail")
    can_focus = True
    MAX_LINES = 500

    LEVELS = (None, "INFO", "WARNING", "ERROR")  # `L` cycles: all lines, then at least INFO, WARNING, ERROR

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.lines: list[str] = []
        self.level: str | None = None

    def cycle_level(self) -> str | None:
        """Show only lines at the next level or above (yolotui.logconfig.level_of_line); returns it."""
        self.level = self.LEVELS[(self.LEVELS.index(self.level) + 1) % len(self.LEVELS)]
        self._show()
        return self.level

    @property
    def line_count(self) -> int:
        """How many lines are kept."""
        return len(self.lines)

    def clear(self) -> None:
        """Forget every line."""
        self.lines = []
        self._show()

    def write_lines(self, lines: Sequence[str]) -> None:
        """Append lines (keeping the last MAX_LINES) and show the newest."""
        self.lines = [*self.lines, *lines][-self.MAX_LINES:]
        self._show()

    def _show(self) -> None:
        rows = max(1, self.content_size.height or 8)
        lines = self.lines
        if self.level is not None:
            import logging

            from yolotui.logconfig import level_of_line

            floor = logging.getLevelName(self.level)
            lines = [line for line in lines if level_of_line(line) >= floor]
        width = self.content_size.width
        if width < 10:  # not laid out yet: the next resize shows them wrapped
            self.set_text(Text("\n".join(lines[-rows:]), no_wrap=True, overflow="ellipsis"))
            return
        # Long lines are wrapped, never cut: an epoch's metrics line ends with the numbers that matter.
        shown: list[Text] = []
        for line in reversed(lines):
            wrapped = list(Text(line).wrap(self.app.console, width, overflow="fold"))
            if shown and len(shown) + len(wrapped) > rows:
                break
            shown[:0] = wrapped
        text = Text("\n", no_wrap=True, overflow="ellipsis").join(shown[-rows:])
        self.set_text(text)

    def on_resize(self) -> None:
        self._shown = None
        self._show()  # the rows that fit, wrapped to the new width
