"""A 300-epoch run against a 3-epoch one: every view's time, the dashboard's peak memory, resume's events work,
a mirror copy after one more epoch, the folder's size. Targets (docs/long-runs.md): the dashboard's first filled frame within 1.5x of the short run's
and its peak RSS within 64 MB of it; resume reads and writes O(one epoch) of events; events plus logs under 50 MB.

The short run is a fixture run folder of the tests (tests/tui_fixtures.make_run, 3 epochs); the long one is a copy
grown to N epochs x M batch events the way the trainer writes them (yolotui.runs.events.EventWriter: the current
layout, batch stream rotated; --layout old writes everything into events.jsonl as yolotui did before, to see
what an old folder costs), with a results.csv row per epoch and a tqdm-like train.log held to its cap as the
supervisor holds it (yolotui.runs.logcap). Each view runs in a fresh interpreter; memory is the child's
ru_maxrss (os.wait4). Run: `python bench/bench_long_run.py [--epochs 300 --batches 2200 --repeats 3]`; take
figures on a quiet machine only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _tui_harness import child_env, read_marks, spawn_in_pty

REPO = Path(__file__).resolve().parent.parent
SHORT_EPOCHS = 3
HARNESS = str(Path(__file__).resolve().parent / "_tui_harness.py")
VIEWS = (("status --json", ["status", "{run}", "--json"]), ("ls", ["ls"]), ("compare", ["compare", "{run}", "{short}"]),
         ("doctor --no-env", ["doctor", "{run}", "--no-env"]), ("logs --tail 50", ["logs", "{run}", "--tail", "50"]))
RESUME = """
import resource, sys, time
from yolotui.engine.train.checkpointing import drop_events_after  # torch and all: the trainer has them loaded
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
dropped = drop_events_after(sys.argv[1], int(sys.argv[2]), 0)
seconds = time.perf_counter() - start
print(dropped, seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
"""


def make_short(root: Path) -> Path:
    """The 3-epoch fixture run (stopped, checkpoints, a short train.log), indexed."""
    sys.path.insert(0, str(REPO / "tests"))
    from tui_fixtures import make_run

    return make_run(root, "short", state="stopped", epochs=SHORT_EPOCHS, done_epochs=SHORT_EPOCHS,
                    log_lines=200).path


def grow(short: Path, target: Path, epochs: int, batches: int, layout: str) -> Path:
    """A copy of `short` grown to `epochs` x `batches` batch events, as the trainer and supervisor leave it,
    ending mid-epoch (an interrupted run, so resume has an epoch to drop)."""
    from yolotui.runs import index
    from yolotui.runs.events import SEGMENT_BYTES, EventWriter
    from yolotui.runs.logcap import TRAIN_LOG_CAP, cap_log
    from yolotui.runs.results import append_row

    shutil.copytree(short, target)
    index.add(target, target.name)
    writer = EventWriter(target / "events.jsonl", attempt=1, segment_bytes=1 << 62 if layout == "old" else
                         SEGMENT_BYTES)
    if layout == "old":
        writer.batches_path = writer.path  # every event into events.jsonl, as before the batch stream
    losses = {"box": 1.0, "cls": 1.0, "dfl": 1.0}
    with open(target / "train.log", "ab") as log:
        for epoch in range(SHORT_EPOCHS, epochs):
            for b in range(1, batches + 1):
                if epoch == epochs - 1 and b > batches // 2:
                    break
                writer.emit("batch", epoch=epoch, epochs=epochs, batch=b, batches=batches, losses=losses, lr=0.01,
                            imgs_per_s=150.0, gpu_mem_gb=1.5)
                log.write(b"\r%3d/%d  1.5G  1.000  1.000  1.000  16  640: %3d%%| %d/%d [00:10<00:20, 20it/s]"
                          % (epoch, epochs, 100 * b // batches, b, batches))
            else:
                metrics = {"P": 0.5, "R": 0.5, "mAP50": 0.5, "mAP50-95": round(0.001 * epoch, 6)}
                writer.emit("epoch", epoch=epoch, epochs=epochs, losses=losses, metrics=metrics, seconds=600.0)
                writer.emit("checkpoint", path=str(target / "weights" / "last.pt"), epoch=epoch + 1, step=0)
                append_row(target / "results.csv", epoch, [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.001 * epoch,
                                                           1.0, 1.0, 1.0, 0.01, 0.01, 0.01])
                log.write(b"\n")
                log.flush()
                if layout != "old":
                    cap_log(target / "train.log", TRAIN_LOG_CAP)  # the supervisor does it every 10 s
    return target


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    """(seconds, peak RSS in KiB) of a command in a fresh process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - start, usage.ru_maxrss


def dashboard(run_dir: Path, env: dict[str, str], scratch: Path) -> tuple[float, int]:
    """(seconds to the dashboard's first filled frame, the process's peak RSS in KiB)."""
    out = scratch / f"attach-{time.monotonic_ns()}.txt"
    start = time.time()
    proc = spawn_in_pty([sys.executable, HARNESS, "attach", str(out), str(run_dir)], env)
    _, _, usage = os.wait4(proc.pid, 0)
    marks = read_marks(out)
    return marks.get("loaded", float("nan")) - start, usage.ru_maxrss


def folder_bytes(run_dir: Path, only_logs: bool = False) -> int:
    """Bytes of the run folder (only its events and logs with `only_logs`)."""
    total = 0
    for path in run_dir.rglob("*"):
        if path.is_file() and (not only_logs or path.suffix in (".jsonl", ".log")):
            total += path.stat().st_size
    return total


def views(run_dir: Path, short: Path, env: dict[str, str]) -> dict[str, float]:
    found = {}
    for name, args in VIEWS:
        argv = [sys.executable, "-m", "yolotui", *(a.format(run=run_dir, short=short) for a in args)]
        found[name] = timed(argv, env)[0]
    return found


def resume_work(run_dir: Path, epoch: int, env: dict[str, str], scratch: Path) -> tuple[float, int, int]:
    """(seconds, peak RSS growth KiB, events dropped) of resume's events work (the engine's drop_events_after,
    what a resume does to the events before the trainer's first step) on a copy of the run (it rewrites)."""
    copy = scratch / f"resume-{time.monotonic_ns()}"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("weights"))
    done = subprocess.run([sys.executable, "-c", RESUME, str(copy / "events.jsonl"), str(epoch)], env=env,
                          capture_output=True, text=True, check=True)
    dropped, seconds, rss = done.stdout.split()
    shutil.rmtree(copy)
    return float(seconds), int(rss), int(dropped)


def mirror_copy(run_dir: Path, scratch: Path) -> tuple[float, int]:
    """(seconds, bytes written to the growing files at the target: what they grew by when extended in place, their
    whole size when replaced) of a mirror copy to a folder after one more epoch (the first copy made before; on
    a copy of the run, in this process)."""
    from yolotui.mirror.copy import copy_once

    copy = scratch / f"mirror-run-{time.monotonic_ns()}" / run_dir.name
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns(".mirror"))
    target = copy.parent / "mirror"
    copy_once(copy, str(target))
    kept = target / run_dir.name
    before = {name: (kept / name).stat() for name in ("events.jsonl", "results.csv")}
    with open(copy / "events.jsonl", "ab") as handle:
        handle.write(b'{"type": "epoch", "epoch": 999999, "ts": 0}\n')
    with open(copy / "results.csv", "ab") as handle:
        handle.write(b"999999,0,0,0,0,0,0,0\n")
    start = time.perf_counter()
    copy_once(copy, str(target))
    seconds = time.perf_counter() - start
    written = 0
    for name, old in before.items():
        new = (kept / name).stat()
        written += new.st_size - old.st_size if new.st_ino == old.st_ino else new.st_size
    shutil.rmtree(copy.parent)
    return seconds, written


def same_views(run_dir: Path, epochs: int) -> str:
    """What the dashboard and the summary say of the long run, checked against what was written."""
    from yolotui.runs.summary import summarize
    from yolotui.tui.runview import RunReader

    view = RunReader(run_dir).refresh()
    summary = summarize(run_dir)
    want = epochs - 1
    ok = (len(view.points) == want and view.points[-1].map == round(0.001 * (want - 1), 6)
          and summary.epoch == want and summary.epochs == epochs and view.points[-1].box == 1.0)
    return f"epochs {len(view.points)}/{summary.epoch} of {epochs}, last mAP {view.points[-1].map}: " + (
        "as written" if ok else "NOT AS WRITTEN")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=300)
    parser.add_argument("--batches", type=int, default=2200, help="batch events per epoch")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--layout", choices=("current", "old"), default="current")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        os.environ["YOLOTUI_HOME"] = str(scratch / "home")
        sys.path.insert(0, str(REPO))
        env = child_env(scratch / "home")
        short = make_short(scratch / "runs")
        began = time.perf_counter()
        long_run = grow(short, scratch / "runs" / "long", args.epochs, args.batches, args.layout)
        print(f"grew {args.epochs} x {args.batches} batch events ({args.layout} layout) in "
              f"{time.perf_counter() - began:.1f} s")
        rows: dict[str, dict[str, list[float]]] = {"short": {}, "long": {}}
        for _ in range(args.repeats):
            for label, run_dir in (("short", short), ("long", long_run)):
                seconds, rss = dashboard(run_dir, env, scratch)
                rows[label].setdefault("dashboard first frame (s)", []).append(seconds)
                rows[label].setdefault("dashboard peak RSS (MB)", []).append(rss / 1024)
                for name, value in views(run_dir, short, env).items():
                    rows[label].setdefault(f"{name} (s)", []).append(value)
                seconds, rss, _ = resume_work(run_dir, args.epochs - 1 if label == "long" else SHORT_EPOCHS, env, scratch)
                rows[label].setdefault("resume events work (s)", []).append(seconds)
                rows[label].setdefault("resume events peak RSS growth (MB)", []).append(rss / 1024)
                seconds, written = mirror_copy(run_dir, scratch)
                rows[label].setdefault("mirror copy after one more epoch (s)", []).append(seconds)
                rows[label].setdefault("mirror bytes written for the growing files", []).append(written)
        print(f"| measure | 3-epoch run | {args.epochs}-epoch run | ratio |")
        print("| --- | --- | --- | --- |")
        for key in rows["short"]:
            a, b = statistics.median(rows["short"][key]), statistics.median(rows["long"][key])
            print(f"| {key} | {a:.3f} | {b:.3f} | {b / a if a else float('nan'):.2f}x |")
        for label, run_dir in (("short", short), ("long", long_run)):
            print(f"{label}: folder {folder_bytes(run_dir) / 1e6:.1f} MB, events + logs "
                  f"{folder_bytes(run_dir, only_logs=True) / 1e6:.1f} MB")
        first = [statistics.median(rows[k]["dashboard first frame (s)"]) for k in ("short", "long")]
        peak = [statistics.median(rows[k]["dashboard peak RSS (MB)"]) for k in ("short", "long")]
        print(f"targets: first frame {first[1] / first[0]:.2f}x (<= 1.5x), peak RSS +{peak[1] - peak[0]:.0f} MB "
              f"(<= 64 MB), events + logs {folder_bytes(long_run, only_logs=True) / 1e6:.1f} MB (< 50 MB)")
        print("views:", same_views(long_run, args.epochs))
        print(json.dumps({k: {m: statistics.median(v) for m, v in r.items()} for k, r in rows.items()}))


if __name__ == "__main__":
    main()
