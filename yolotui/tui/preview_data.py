"""What the home screen's preview pane shows for the highlighted run, read at bounded cost (a thread worker).

The state in words, mini loss and mAP curves from the tail of results.csv, the last lines of train.log (its
tail only), and for a run that ended the advice `yolotui doctor` gives (yolotui.jobs.doctor) with the key that
acts on it: "R resume at epoch 18 of 50", "F fine-tune from best.pt".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from yolotui import formatting
from yolotui.runs.layout import (
    BEST_PT,
    LAST_PT,
    LIVE_STATES,
    RESULTS_CSV,
    STATUS_JSON,
    TRAIN_LOG,
    WEIGHTS_DIR,
)
from yolotui.tui.home_data import MAP_KEY, RESULTS_TAIL_BYTES, HomeRow, file_stamp, tail_results

LOG_TAIL_BYTES = 8 * 1024
LOG_LINES = 12
CURVE_POINTS = 60
LOSS_KEYS = ("train/box_loss", "train/cls_loss", "train/dfl_loss")


@dataclass
class Preview:
    """The preview of one run."""

    path: str
    losses: tuple[float, ...] = ()  # train loss (box + cls + dfl) per finished epoch, the latest CURVE_POINTS
    maps: tuple[float, ...] = ()  # mAP50-95 per finished epoch
    best_epoch: int | None = None  # 1-based epoch of the best mAP50-95 among `maps`
    log_lines: list[str] = field(default_factory=list)
    advice: str | None = None  # doctor's advice for an ended run
    action: str | None = None  # the key that follows it: "R resume at epoch 18 of 50"
    problem: str | None = None  # why the advice could not be made


def state_words(row: HomeRow) -> str:
    """The run's state as a sentence: 'running epoch 4 of 20, 18% done, about 12m left'."""
    summary = row.summary
    state = summary.state
    if state == "queued":
        return f"queued: {(summary.message or 'waiting for its turn').removeprefix('queued: ')}"
    if state == "failed":
        what = summary.failure_class or "an error"
        return f"failed ({what}) after {formatting.epochs_done(summary.epoch, summary.epochs)}" + (
            f": {summary.message}" if summary.message else "")
    if state == "finished":
        return f"finished: {formatting.epochs_done(summary.epoch, summary.epochs)}"
    if state in LIVE_STATES:
        text = f"{state}: {formatting.epoch_in_progress(summary.epoch, summary.epochs, unknown='starting')}"
        if row.fraction is not None:
            text += f", {row.fraction * 100:.0f}% done"
        if row.eta_s is not None:
            text += f", about {formatting.duration(row.eta_s)} left"
        return text
    return f"{state} after {formatting.epochs_done(summary.epoch, summary.epochs)}"


def curves(rows: list[dict[str, float]]) -> tuple[tuple[float, ...], tuple[float, ...], int | None]:
    """(train loss per epoch, mAP50-95 per epoch, 1-based epoch of the best mAP) of results.csv rows."""
    losses, maps, best, best_epoch = [], [], None, None
    for row in rows[-CURVE_POINTS:]:
        parts = [row[k] for k in LOSS_KEYS if k in row]
        if parts:
            losses.append(sum(parts))
        if MAP_KEY in row:
            maps.append(row[MAP_KEY])
            if best is None or row[MAP_KEY] > best:
                best, best_epoch = row[MAP_KEY], int(row.get("epoch", 0)) + 1
    return tuple(losses), tuple(maps), best_epoch


def log_tail(path: Path, max_bytes: int = LOG_TAIL_BYTES, count: int = LOG_LINES) -> list[str]:
    """The last `count` display lines of train.log, from its last `max_bytes` only."""
    from yolotui.logtext import LogCleaner
    from yolotui.runs.tailread import tail_window

    data, _ = tail_window(path, max_bytes)
    lines = data.decode("utf-8", "replace").split("\n")
    if lines and not lines[-1]:
        lines.pop()
    return LogCleaner().feed(lines)[-count:]


def action_for(recommended: str, diagnosis) -> str | None:
    """The key and words for doctor's recommendation: 'R resume at epoch 18 of 50', 'F fine-tune', ..."""
    from yolotui.health import report

    last = diagnosis.last
    if recommended == report.RESUME:
        return f"R resume at {formatting.epoch_in_progress(last.epoch, last.total_epochs, unknown='its last epoch')}"
    if recommended == report.RESUME_FALLBACK:
        name = Path(diagnosis.recommended_checkpoint or BEST_PT).name
        return f"R resume from {name}"
    if recommended == report.EXTEND:
        return "R extend with more epochs · F fine-tune"
    if recommended == report.FINETUNE:
        name = Path(diagnosis.recommended_checkpoint or BEST_PT).name
        return f"F fine-tune from {name}"
    if recommended == report.RESTART:
        return "n start a new run"
    return None


class PreviewReader:
    """Reads previews; doctor's advice is made again only when the run's status or checkpoints changed."""

    def __init__(self) -> None:
        self._advice: dict[str, tuple[tuple, str | None, str | None, str | None]] = {}

    def read(self, row: HomeRow) -> Preview:
        """The preview of `row`'s run (thread)."""
        folder = Path(row.summary.path)
        preview = Preview(row.summary.path)
        preview.losses, preview.maps, preview.best_epoch = curves(
            tail_results(folder / RESULTS_CSV, RESULTS_TAIL_BYTES))
        preview.log_lines = log_tail(folder / TRAIN_LOG)
        if row.summary.state not in LIVE_STATES and row.summary.state != "queued":
            preview.advice, preview.action, preview.problem = self._doctor(folder)
        return preview

    def _doctor(self, folder: Path) -> tuple[str | None, str | None, str | None]:
        key = tuple(file_stamp(folder / name) for name in (STATUS_JSON, f"{WEIGHTS_DIR}/{LAST_PT}",
                                                       f"{WEIGHTS_DIR}/{BEST_PT}"))
        cached = self._advice.get(str(folder))
        if cached is not None and cached[0] == key:
            return cached[1:]
        try:
            from yolotui.jobs.doctor import diagnose_run

            # No environment probe, no logind, no hashing: the cheap parts of doctor, enough for its advice.
            diagnosis = diagnose_run(folder, environment=False, logind=False, verify_hash=False)
            found = (diagnosis.advice or None, action_for(diagnosis.recommended, diagnosis), None)
        except Exception as exc:  # a damaged run folder: a line in the pane, never a traceback
            found = (None, None, f"no advice: {exc}")
        self._advice[str(folder)] = (key, *found)
        return found
