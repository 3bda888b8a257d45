"""The demo use case: start the demo run, or open the demo that is already training.

`yolotui demo` run again while a demo trains must not start `demo2` on the same cores: `start_demo` looks for
a live run among the folders the demo numbers (`project/demo`, `demo2`, `demo3` ...) and returns it with the verb
`opened` instead of launching a second one.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from yolotui.jobs.launch import StartedRun, started

OPENED = "opened"


def live_demo(project: Path, name: str) -> Path | None:
    """The newest live run among `project/name`, `project/name2`, ... and the indexed runs so named (a demo
    started from another folder); None when none is live."""
    from yolotui.runs import index
    from yolotui.runs.layout import LIVE_STATES
    from yolotui.runs.status import effective_state

    project = Path(project).expanduser()
    pattern = re.compile(re.escape(name) + r"([0-9]*)")
    try:
        folders = [entry for entry in project.iterdir() if entry.is_dir()]
    except OSError:
        folders = []
    try:
        folders += [Path(entry.path) for entry in index.entries(check_exists=False)]
    except Exception:  # an unreadable index: the project folder still counts
        pass
    live: list[tuple[float, Path]] = []
    for folder in {f.resolve() for f in folders}:
        if pattern.fullmatch(folder.name) is None or not folder.is_dir():
            continue
        if effective_state(folder) in LIVE_STATES:
            live.append((_started(folder), folder))
    return max(live)[1] if live else None


def _started(run_dir: Path) -> float:
    from yolotui.runs.status import read_status

    status = read_status(run_dir)
    return float(status.started or status.updated or 0.0) if status is not None else 0.0


def start_demo(options: dict[str, Any]) -> StartedRun:
    """Open the live demo (verb `opened`, a note saying so) or start a new one (verb `started`).

    `options` are the new run's training options (project and name included).
    """
    from yolotui.jobs.new_run import NewRunRequest, new_run

    project = Path(str(options.get("project") or "runs/train"))
    name = str(options.get("name") or "demo")
    running = live_demo(project, name)
    if running is not None:
        note = (f"a demo is already training (run {running.name}): opening it instead of starting a second one on "
                f"the same cores (start another with --name NAME)")
        return started(running, OPENED, [], [note])
    return new_run(NewRunRequest(options))
