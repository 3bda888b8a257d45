"""Plain-text progress of a run (`yolotui train --attach`, `yolotui demo --no-tui`): reads the run folder only.

Ctrl-C detaches: the run goes on under its supervisor. Returns when the run ends (for a mirrored run, once its
supervisor has made the last copy).
"""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from yolotui import formatting
from yolotui.runs import layout
from yolotui.runs.eventlog import RunFollower
from yolotui.runs.status import effective_state

BAR_WIDTH = 24


def bar(done: float, total: float, width: int = BAR_WIDTH) -> str:
    """A text progress bar `[#####.....]`."""
    fraction = 0.0 if total <= 0 else min(max(done / total, 0.0), 1.0)
    filled = int(round(fraction * width))
    return "[" + "#" * filled + "." * (width - filled) + "]"


def describe(event: dict[str, Any]) -> str | None:
    """One line for an event worth printing (None for the rest)."""
    kind = event.get("type")
    if kind == "batch":
        epoch, epochs = int(event.get("epoch", 0)), int(event.get("epochs", 0))
        batch, batches = int(event.get("batch", 0)), int(event.get("batches", 0))
        losses = event.get("losses") or {}
        loss_text = " ".join(f"{k} {float(v):.3f}" for k, v in losses.items())
        return (f"{formatting.epoch_in_progress(epoch, epochs or None)} {bar(batch, batches)} {batch}/{batches}  "
                f"{loss_text}  {formatting.speed(float(event.get('imgs_per_s') or 0))}")
    if kind == "epoch":
        m = event.get("metrics") or {}
        done = int(event.get("epoch", 0)) + 1
        return (f"{formatting.epochs_done(done, event.get('epochs'))}: P {m.get('P', 0):.3f} "
                f"R {m.get('R', 0):.3f} mAP50 {m.get('mAP50', 0):.3f} mAP50-95 {m.get('mAP50-95', 0):.3f} "
                f"({float(event.get('seconds') or 0):.1f}s)")
    if kind == "checkpoint":
        return (f"checkpoint {Path(str(event.get('path'))).name}: "
                f"{formatting.epochs_done(event.get('epoch'), event.get('epochs'), event.get('step'))}")
    if kind == "start":
        resumed = event.get("resumed_from")
        where = (f" (resumed after {formatting.epochs_done(resumed['epoch'], None, resumed['step'])})"
                 if resumed else "")
        line = f"training started on {', '.join(event.get('devices') or ['?'])}{where}"
        transfer = event.get("transfer")
        if transfer:
            line += (f"; weights: {transfer['transferred']}/{transfer['total']} tensors transferred, "
                     f"{len(transfer.get('reinitialised') or [])} re-initialised")
        if event.get("frozen"):
            line += f"; {event['frozen']} parameter tensors frozen"
        return line
    if kind in ("warning", "error"):
        return f"{kind}: [{event.get('kind')}] {event.get('message')}"
    if kind == "compile":
        return f"model compiled (torch.compile) in {float(event.get('seconds') or 0):.1f}s"
    if kind == "stop":
        return f"stopped ({event.get('reason')}); resume with: yolotui resume"
    if kind == "done":
        m = event.get("metrics") or {}
        return f"done: mAP50 {m.get('mAP50', 0):.3f} mAP50-95 {m.get('mAP50-95', 0):.3f}; best: {event.get('best')}"
    return None


MIRROR_WAIT_S = 900.0  # the longest a follower waits for a mirrored run's supervisor to make its last copy


def wait_for_last_mirror_copy(run_dir: Path, out: TextIO, max_s: float = MIRROR_WAIT_S) -> None:
    """A mirrored run's supervisor makes its last copy after recording the end: wait for it to let go of the
    lock, so a job script that ends with `--attach` (SkyPilot, a container) does not end the machine first."""
    from yolotui.runs import lock
    from yolotui.runs.status import read_status

    status = read_status(run_dir)
    if status is None or not status.mirror or not lock.is_held(run_dir):
        return
    out.write("waiting for the last mirror copy ...\n")
    out.flush()
    deadline = time.monotonic() + max_s
    while lock.is_held(run_dir) and time.monotonic() < deadline:
        time.sleep(0.2)
    status = read_status(run_dir)
    if status is not None and status.mirror:
        from yolotui.mirror.driver import describe

        out.write(f"mirror: {describe(status.mirror)}\n")
        out.flush()


def follow(run_dir: Path, out: TextIO = sys.stdout, interval: float = 0.5, from_start: bool = True) -> str:
    """Print the run's progress until it ends; Ctrl-C detaches. Returns the run's final (or current) state."""
    run_dir = Path(run_dir)
    follower = RunFollower(run_dir)
    if not from_start:
        follower.poll()
    state = effective_state(run_dir)
    try:
        while True:
            for event in follower.poll():
                line = describe(event)
                if line:
                    out.write(line + "\n")
                    out.flush()
            state = effective_state(run_dir)
            if state in layout.ENDED_STATES:
                for event in follower.poll():
                    line = describe(event)
                    if line:
                        out.write(line + "\n")
                out.write(f"run {run_dir.name}: {state}\n")
                out.flush()
                wait_for_last_mirror_copy(run_dir, out)
                return state
            time.sleep(interval)
    except KeyboardInterrupt:
        out.write(f"\ndetached; the run goes on. Follow again with: yolotui attach {shlex.quote(str(run_dir))}\n")
        out.flush()
        return state
