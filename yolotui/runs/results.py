"""results.csv: one row per finished epoch, with the official YOLOv9 header and 20-wide formatting.

Dialects: ultralytics' header read under the official names every reader uses.

ultralytics writes `epoch,time,train/box_loss,...,metrics/mAP50-95(B),...,lr/pg0,...` with the epoch counted
from 1; the official trainer (and yolotui's engine) write `epoch,train/box_loss,...,metrics/mAP_0.5:0.95,...,
x/lr0,...` counted from 0. `official_names` maps the first onto the second, so results.csv of an ultralytics run
is charted, listed and compared like any other, and never rewritten.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from yolotui.runs.atomic import atomic_write_text

RESULT_KEYS = (
    "train/box_loss",
    "train/cls_loss",
    "train/dfl_loss",
    "metrics/precision",
    "metrics/recall",
    "metrics/mAP_0.5",
    "metrics/mAP_0.5:0.95",
    "val/box_loss",
    "val/cls_loss",
    "val/dfl_loss",
    "x/lr0",
    "x/lr1",
    "x/lr2",
)
HEADER = ("epoch", *RESULT_KEYS)


def header_line() -> str:
    """The header row as the official trainer writes it."""
    return ",".join(f"{name:>20s}" for name in HEADER) + "\n"


def format_row(epoch: int, values: Sequence[float]) -> str:
    """One row: the 0-based epoch then the 13 values, each `%20.5g`."""
    if len(values) != len(RESULT_KEYS):
        raise ValueError(f"results row needs {len(RESULT_KEYS)} values, got {len(values)}")
    return ",".join("%20.5g" % v for v in (epoch, *values)) + "\n"


def append_row(path: Path, epoch: int, values: Sequence[float]) -> None:
    """Append a row, writing the header first when the file is new or empty."""
    path = Path(path)
    line = format_row(epoch, values)
    if not path.exists() or path.stat().st_size == 0:
        line = header_line() + line
    from yolotui.runs.atomic import append_bytes

    append_bytes(path, line.encode("ascii"))


def read_rows(path: Path) -> list[dict[str, float]]:
    """Parse results.csv into dicts keyed by the header names; a torn or malformed row is skipped."""
    try:
        text = Path(path).read_text(encoding="ascii", errors="replace")
    except OSError:
        return []
    lines = text.split("\n")
    if not lines or not lines[0].strip():
        return []
    from yolotui.runs.results import official_names

    names, offset = official_names([name.strip() for name in lines[0].split(",")])  # ultralytics' header too
    rows: list[dict[str, float]] = []
    complete = lines[1:-1] if not text.endswith("\n") else lines[1:]
    for line in complete:
        cells = line.split(",")
        if len(cells) != len(names):
            continue
        try:
            row = {name: float(cell) for name, cell in zip(names, cells)}
        except ValueError:
            continue
        if offset and "epoch" in row:
            row["epoch"] += offset
        rows.append(row)
    return rows


def truncate_after(path: Path, last_epoch: int) -> int:
    """Drop rows whose epoch is above `last_epoch` (a resume from an earlier checkpoint); returns rows kept."""
    rows = read_rows(path)
    kept = [row for row in rows if row["epoch"] <= last_epoch]
    if len(kept) == len(rows) and Path(path).exists():
        return len(kept)
    text = header_line() + "".join(format_row(int(r["epoch"]), [r[k] for k in RESULT_KEYS]) for r in kept)
    atomic_write_text(Path(path), text)
    return len(kept)


ULTRALYTICS_NAMES = {
    "metrics/precision(B)": "metrics/precision",
    "metrics/recall(B)": "metrics/recall",
    "metrics/mAP50(B)": "metrics/mAP_0.5",
    "metrics/mAP50-95(B)": "metrics/mAP_0.5:0.95",
    "lr/pg0": "x/lr0",
    "lr/pg1": "x/lr1",
    "lr/pg2": "x/lr2",
}


def is_ultralytics(names: list[str]) -> bool:
    """True for ultralytics' header (its `time` column, or a `(B)` box metric)."""
    return "time" in names or any(name.endswith("(B)") for name in names)


def official_names(names: list[str]) -> tuple[list[str], int]:
    """(the header under the official names, what to add to its epoch column to count from 0)."""
    if not is_ultralytics(names):
        return names, 0
    return [ULTRALYTICS_NAMES.get(name, name) for name in names], -1
