"""The cells of one row of the home screen's runs table, and its sort keys.

A running run shows a progress bar with its ETA, a failed one its failure class, a queued one what it waits
for; every run its backend (by the backend's display name) and a sparkline of its mAP50-95.
"""

from __future__ import annotations

from rich.text import Text

from yolotui import formatting
from yolotui.formatting import age as format_age
from yolotui.formatting import duration as format_duration
from yolotui.formatting import short_when as format_time
from yolotui.tui.home_data import HomeRow
from yolotui.tui.widgets.panel_base import STATE_CLASS, VERDICT_CLASS
from yolotui.tui.widgets.sparkline import bar, sparkline

COLUMNS = ("name", "state", "epoch", "progress", "mAP50-95", "trend", "checkpoint", "backend", "started", "device")
STATE_STYLE = {"good": "bold green", "info": "bold cyan", "warn": "bold yellow", "bad": "bold red",
               "muted": "dim"}
QUEUE_NOTE_WIDTH = 24  # how much of a queued run's reason the progress column shows
FAILURE_WIDTH = 24
BAR_WIDTH = 8
TREND_WIDTH = 10
LIVE = ("running", "restarting", "stopping")


def progress_cell(row: HomeRow) -> Text:
    """'████░░░░ 52% eta 1h05m' for a live run; the failure for a failed one; what a queued run waits for."""
    summary = row.summary
    state = summary.state
    if state == "queued":
        from yolotui.placement.queue import short_note

        return Text(short_note(summary.message or "waiting", QUEUE_NOTE_WIDTH), "italic")
    if state == "failed":
        what = summary.failure_class or "failed"
        message = (summary.message or "").strip().splitlines()
        text = Text(what, "bold red")
        if message and message[0] != what:
            room = max(0, FAILURE_WIDTH - len(what) - 3)
            note = message[0] if len(message[0]) <= room else message[0][: max(0, room - 1)] + "…"
            text.append(f" · {note}", "red")
        return text
    if state == "finished":
        return Text("done", "dim")
    fraction = row.fraction
    if fraction is None:
        return Text("--", "dim")
    live = state in LIVE
    text = Text(bar(fraction, BAR_WIDTH), "cyan" if live else "dim")
    text.append(f" {fraction * 100:3.0f}%")
    if live and row.eta_s is not None:
        text.append(f" eta {format_duration(row.eta_s)}", "dim")
    return text


def trend_cell(row: HomeRow) -> Text:
    """mAP50-95 over the latest epochs as a sparkline scaled to its own range."""
    values = row.map_trend
    if len(values) < 2:
        return Text("")
    low, high = min(values), max(values)
    return Text(sparkline(values, min(TREND_WIDTH, len(values)), low, high if high > low else low + 1e-9),
                "green")


def cells(row: HomeRow, now: float, marked: bool = False) -> tuple:
    """The cells of `row` in COLUMNS order."""
    summary = row.summary
    state_style = STATE_STYLE[STATE_CLASS.get(summary.state, "muted")]
    epoch = formatting.epochs(summary.epoch, summary.epochs)
    best = f"{summary.best_map:.4f}" if summary.best_map is not None else "--"
    checkpoint = Text("none", "dim")
    if row.checkpoint is not None:
        age = format_age(now - row.checkpoint.mtime) if row.checkpoint.mtime else "--"
        verdict = row.checkpoint.verdict
        checkpoint = Text.assemble(f"{age} ", (verdict, STATE_STYLE[VERDICT_CLASS.get(verdict, "muted")]))
    elif summary.checkpoint_age is not None:
        from yolotui.tui.fleet_source import remote_key

        if remote_key(summary.path):  # another host's last.pt: its age as that host read it, not checked here
            checkpoint = Text.assemble(f"{format_age(summary.checkpoint_age)} ", ("remote", "dim"))
    state = summary.state if summary.attempt <= 1 else f"{summary.state} #{summary.attempt}"
    name = Text.assemble(("● ", "bold"), summary.name) if marked else summary.name
    device = summary.device or "--"
    if summary.slurm:  # a SLURM run: where and how long, or why it waits
        from yolotui.runs.slurm_state import short_text

        device = f"{summary.device + ' ' if summary.device else ''}{short_text(summary.slurm)}"
    return (name, Text(state, state_style), epoch, progress_cell(row), best, trend_cell(row), checkpoint,
            row.backend or "--", format_time(summary.started), device)


def sort_key(row: HomeRow, column: str):
    """The key that orders rows by `column`."""
    summary = row.summary
    if column == "name":
        return (summary.name.lower(),)
    if column == "state":
        return (summary.state,)
    if column == "epoch":
        return (summary.epoch or 0, summary.epochs or 0)
    if column == "progress":
        return (row.fraction if row.fraction is not None else -1.0,)
    if column in ("mAP50-95", "trend"):
        return (summary.best_map if summary.best_map is not None else -1.0,)
    if column == "checkpoint":
        mtime = row.checkpoint.mtime if row.checkpoint and row.checkpoint.mtime else 0.0
        return (-mtime,)
    if column == "backend":
        return (row.backend or "",)
    if column == "device":
        return (summary.device or "",)
    return (-(summary.started or 0.0),)
