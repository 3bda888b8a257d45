"""Where the home screen's rows come from: `LocalRuns`, this machine's runs index, read at bounded cost.

A source turns its runs into HomeRows (yolotui/tui/home_data.py) in the home screen's loader thread; the
screen and its widgets know nothing else about it. Another source (another machine's runs) gives the same
rows with its `host` set, and the widgets show it as they are.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

from yolotui.runs import index
from yolotui.runs.layout import LAST_PT, WEIGHTS_DIR
from yolotui.runs.summary import RunSummary, summarize_all
from yolotui.tui.home_data import ExtrasReader, HomeRow
from yolotui.tui.sources import CheckpointFacts, diagnose, run_pids

PIDS_TTL_S = 10.0  # a live run's process tree is rescanned at most this often (a scan walks /proc)


class LocalRuns:
    """This machine's indexed runs, with each last.pt's verdict and the extras home_data reads."""

    host: str | None = None

    def __init__(self) -> None:
        self._extras = ExtrasReader()
        self._pids_cache: dict[int, tuple[float, frozenset[int]]] = {}
        self._ckpt_cache: dict[str, tuple[tuple[float, int], CheckpointFacts]] = {}

    def read(self, publish: Callable[[list[HomeRow], str | None], None],
             first: bool = False) -> tuple[list[HomeRow], str | None]:
        """(every run's row, the runs index's problem or None); thread.

        The runs are shown as soon as they are read: when a checkpoint is new or has changed, its verdict
        (which reads, and hashes, the whole file: seconds for a large one) is made after `publish` got a first,
        partial reading, so a run that was just launched appears at once whatever the other runs' checkpoints.
        The `first` reading also publishes the summaries before each run's extras (backend, trend, ETA)."""
        summaries = summarize_all()
        problem = index.last_problem()  # a damaged index is named, never shown as "no runs yet"
        rows, pending = [], []
        for summary in summaries:
            facts, fresh = self._known_checkpoint(summary)
            if not fresh:
                pending.append(len(rows))
            rows.append(HomeRow(summary, facts, host=self.host) if first else self.row(summary, facts))
        if pending or first:
            publish(list(rows), problem)
            if first:
                rows = [self.row(row.summary, row.checkpoint) for row in rows]
            for i in pending:
                rows[i] = dataclasses.replace(rows[i], checkpoint=self._checkpoint(rows[i].summary))
        return rows, problem

    def row(self, summary: RunSummary, facts: CheckpointFacts | None) -> HomeRow:
        """The run's row: its summary, checkpoint, and what home_data reads beyond them."""
        extras = self._extras.extras(summary)
        return HomeRow(summary, facts, backend=extras.backend, map_trend=extras.map_trend,
                       fraction=extras.fraction, eta_s=extras.eta_s, pids=self._pids(extras.trainer_pid),
                       host=self.host)

    def _pids(self, trainer_pid: int | None) -> frozenset[int]:
        """A live trainer's process tree, rescanned at most every PIDS_TTL_S."""
        if not trainer_pid:
            return frozenset()
        cached = self._pids_cache.get(trainer_pid)
        if cached is None or time.monotonic() - cached[0] > PIDS_TTL_S:
            cached = (time.monotonic(), frozenset(run_pids(trainer_pid)))
            self._pids_cache[trainer_pid] = cached
        return cached[1]

    def _known_checkpoint(self, summary: RunSummary) -> tuple[CheckpointFacts | None, bool]:
        """(what to show for the run's last.pt now, whether that is its verdict for the file as it is)."""
        path = Path(summary.path) / WEIGHTS_DIR / LAST_PT
        try:
            stat = path.stat()
        except OSError:
            return None, True
        cached = self._ckpt_cache.get(str(path))
        if cached and cached[0] == (stat.st_mtime, stat.st_size):
            return cached[1], True
        if cached:
            return cached[1], False  # the previous verdict until the new one is made
        return CheckpointFacts(path.name, str(path), "checking", size=stat.st_size, mtime=stat.st_mtime), False

    def _checkpoint(self, summary: RunSummary) -> CheckpointFacts | None:
        path = Path(summary.path) / WEIGHTS_DIR / LAST_PT
        try:
            stat = path.stat()
        except OSError:
            return None
        key = (stat.st_mtime, stat.st_size)
        cached = self._ckpt_cache.get(str(path))
        if cached and cached[0] == key:
            return cached[1]
        facts = diagnose(path, summary.epochs)
        self._ckpt_cache[str(path)] = (key, facts)
        return facts
