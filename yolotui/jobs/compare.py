"""Runs side by side: best and final metrics, the curves per metric, and the opt.yaml/hyp.yaml keys that differ.

Torch-free and UI-free; reads only run-folder files (results.csv, opt.yaml, hyp.yaml, status.json), so it works
for yolotui engine runs and for official train_dual.py runs alike (same results.csv header, same yaml keys).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yolotui.errors import UserError

MAX_YAML_BYTES = 1 << 20  # opt.yaml/hyp.yaml are a few KB; anything larger is not one
# results.csv column -> short metric name (the event names)
METRIC_COLUMNS = {
    "metrics/precision": "P",
    "metrics/recall": "R",
    "metrics/mAP_0.5": "mAP50",
    "metrics/mAP_0.5:0.95": "mAP50-95",
}
LOSS_COLUMNS = {
    "train/box_loss": "train box",
    "train/cls_loss": "train cls",
    "train/dfl_loss": "train dfl",
    "val/box_loss": "val box",
    "val/cls_loss": "val cls",
    "val/dfl_loss": "val dfl",
}
CURVES = {**METRIC_COLUMNS, **LOSS_COLUMNS}
# keys that differ between any two runs by construction (the run's own name and folder): not a difference
SKIPPED_KEYS = {"name", "save_dir"}


def fitness(row: dict[str, float]) -> float:
    """The official fitness: 0.1 mAP50 + 0.9 mAP50-95."""
    return 0.1 * row.get("mAP50", 0.0) + 0.9 * row.get("mAP50-95", 0.0)


@dataclass
class RunMetrics:
    """One run's figures: `best` is the epoch of highest fitness, `final` the last finished epoch."""

    name: str
    path: str
    state: str
    epochs_done: int
    epochs_planned: int | None
    best: dict[str, float] | None
    final: dict[str, float] | None
    curves: dict[str, list[tuple[int, float]]] = field(default_factory=dict)

    def to_dict(self, with_curves: bool = False) -> dict[str, Any]:
        """JSON-ready; curves only when asked (they are long)."""
        out = {k: getattr(self, k) for k in ("name", "path", "state", "epochs_done", "epochs_planned", "best",
                                              "final")}
        if with_curves:
            out["curves"] = {k: [list(p) for p in v] for k, v in self.curves.items()}
        return out


@dataclass
class KeyDiff:
    """A key whose value is not the same in every run: `values[i]` belongs to run i (None when absent)."""

    file: str
    key: str
    values: list[Any]


@dataclass
class Comparison:
    """The runs in the order given, and the keys of opt.yaml/hyp.yaml that differ between them."""

    runs: list[RunMetrics]
    diff: list[KeyDiff]
    warnings: list[str] = field(default_factory=list)

    def to_dict(self, with_curves: bool = False) -> dict[str, Any]:
        """JSON-ready form (what `yolotui compare --json` prints)."""
        return {"runs": [r.to_dict(with_curves) for r in self.runs],
                "diff": [{"file": d.file, "key": d.key, "values": d.values} for d in self.diff],
                "warnings": list(self.warnings)}


def _row_metrics(row: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {"epoch": int(row["epoch"])}
    for column, name in METRIC_COLUMNS.items():
        if column in row:
            out[name] = row[column]
    out["fitness"] = round(fitness(out), 6)
    return out


def _read_small_yaml(path: Path, warnings: list[str]) -> dict[str, Any] | None:
    from yolotui.config import load_yaml

    try:
        size = path.stat().st_size
    except OSError:
        return None
    if size > MAX_YAML_BYTES:
        warnings.append(f"{path}: {size} bytes, too large for an options file; left out of the diff")
        return None
    try:
        return load_yaml(path, what=path.name)
    except UserError as exc:
        warnings.append(f"{exc}; left out of the diff")
        return None


def run_metrics(run_dir: Path) -> RunMetrics:
    """Best/final metrics and the curves of the run at `run_dir` (empty when no epoch has finished)."""
    from yolotui.runs.layout import RESULTS_CSV
    from yolotui.runs.results import read_rows
    from yolotui.runs.summary import summarize

    summary = summarize(run_dir)
    rows = read_rows(run_dir / RESULTS_CSV)
    curves: dict[str, list[tuple[int, float]]] = {name: [] for name in CURVES.values()}
    for row in rows:
        for column, name in CURVES.items():
            if column in row:
                curves[name].append((int(row["epoch"]), row[column]))
    curves = {k: v for k, v in curves.items() if v}
    metrics = [_row_metrics(row) for row in rows]
    best = max(metrics, key=lambda m: m["fitness"]) if metrics else None
    planned = summary.epochs
    if planned is None:  # an official run has no events: its opt.yaml says how many epochs were planned
        epochs = (_read_small_yaml(run_dir / "opt.yaml", []) or {}).get("epochs")
        planned = epochs if isinstance(epochs, int) else None
    return RunMetrics(name=summary.name, path=str(run_dir), state=summary.state, epochs_done=len(rows),
                      epochs_planned=planned, best=best, final=metrics[-1] if metrics else None,
                      curves=curves)


def config_diff(run_dirs: list[Path], warnings: list[str]) -> list[KeyDiff]:
    """The opt.yaml and hyp.yaml keys whose values are not equal in all runs (missing counts as a value)."""
    diffs: list[KeyDiff] = []
    for file in ("opt.yaml", "hyp.yaml"):
        docs = [_read_small_yaml(run / file, warnings) for run in run_dirs]
        if all(doc is None for doc in docs):
            continue
        keys: list[str] = []
        for doc in docs:
            keys += [k for k in (doc or {}) if k not in keys]
        for key in keys:
            if file == "opt.yaml" and key in SKIPPED_KEYS:
                continue
            values = [(doc or {}).get(key) for doc in docs]
            if any(v != values[0] for v in values[1:]):
                diffs.append(KeyDiff(file=file, key=str(key), values=values))
    return diffs


def compare_runs(run_dirs: list[Path]) -> Comparison:
    """Compare the runs at `run_dirs` (at least two, no repeats)."""
    if len(run_dirs) < 2:
        raise UserError("compare needs at least two runs (names from `yolotui ls`, or run folders)")
    resolved = [Path(p).resolve() for p in run_dirs]
    if len(set(resolved)) != len(resolved):
        raise UserError("a run is given twice; name each run once")
    warnings: list[str] = []
    runs = [run_metrics(path) for path in resolved]
    for run in runs:
        if run.final is None:
            warnings.append(f"{run.name}: no finished epoch yet (no results.csv rows)")
    return Comparison(runs=runs, diff=config_diff(resolved, warnings), warnings=warnings)


def resolve_and_compare(names: list[str]) -> Comparison:
    """`compare_runs` on runs named as the user typed them (names from the index, or folders)."""
    from yolotui.runs.resolve import resolve_run

    return compare_runs([resolve_run(name) for name in names])
