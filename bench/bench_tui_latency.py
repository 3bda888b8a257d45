"""Latency from an `epoch` event appended to events.jsonl to the dashboard painting it. Target: <= 250 ms.

The TUI runs as a real process on a pseudo terminal (`attach` on a fixture run whose lock this script holds);
each append is timestamped here and the child stamps the frame that shows the new epoch count. The baseline,
measured in the same run, is how soon a bare reader polling every millisecond sees the same append (the floor
set by the file system), so the ratio shows what the watcher, worker, message and paint add.
Run: `python bench/bench_tui_latency.py [--events N]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from _tui_harness import child_env, read_marks, spawn_in_pty

HARNESS = str(Path(__file__).resolve().parent / "_tui_harness.py")


def floor_latency(events_path: Path, append, count: int) -> list[float]:
    """Append `count` events and time how soon an EventFollower polling every 1 ms sees each."""
    from yolotui.runs.eventlog import EventFollower

    follower = EventFollower(events_path)
    follower.offset = events_path.stat().st_size
    delays = []
    for _ in range(count):
        seen = threading.Event()
        stamp = {}

        def watch(stamp: dict = stamp, seen: threading.Event = seen) -> None:
            while not follower.poll():
                time.sleep(0.001)
            stamp["t"] = time.time()
            seen.set()

        thread = threading.Thread(target=watch)
        thread.start()
        time.sleep(0.01)
        start = append()
        seen.wait(5)
        thread.join()
        delays.append(stamp["t"] - start)
    return delays


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        os.environ["YOLOTUI_HOME"] = str(scratch / "home")
        from tui_fixtures import make_run, write_epoch

        from yolotui.runs.events import EventWriter

        run = make_run(scratch / "runs", "latency", state="running", epochs=500, done_epochs=2, hold_lock=True)
        writer = EventWriter(run.path / "events.jsonl", attempt=1)
        next_epoch = [2]

        def append() -> float:
            start = time.time()
            write_epoch(run.path, writer, next_epoch[0], 500)
            next_epoch[0] += 1
            return start

        floor = floor_latency(run.path / "events.jsonl", append, 5)
        out = scratch / "marks.txt"
        env = {**child_env(scratch / "home"), "LINGER": "3600"}
        proc = spawn_in_pty([sys.executable, HARNESS, "latency", str(out), str(run.path)], env)
        try:
            deadline = time.time() + 60
            while "loaded" not in read_marks(out) and time.time() < deadline:
                time.sleep(0.05)
            time.sleep(1.0)
            appended: dict[int, float] = {}
            for _ in range(args.events):
                finished_after = next_epoch[0] + 1  # finished epochs once this one is appended
                appended[finished_after] = append()
                time.sleep(0.7)
            time.sleep(1.0)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            run.release()
        marks = read_marks(out)
    if os.environ.get("TRACE"):
        print(sorted((v, k) for k, v in marks.items())[-12:], sorted(appended.values())[-5:])
    delays = [marks[f"shown-{count}"] - start for count, start in appended.items() if f"shown-{count}" in marks]
    missed = len(appended) - len(delays)
    median, worst = statistics.median(delays), max(delays)
    base = statistics.median(floor)
    print(f"floor (1 ms polling reader):   {base * 1000:7.1f} ms median")
    print(f"append -> dashboard painted:   {median * 1000:7.1f} ms median, {worst * 1000:.1f} ms worst "
          f"over {len(delays)} events ({missed} not seen)")
    print(f"target <= 250 ms: {'met' if median <= 0.25 else 'MISSED'} (median {median / 0.25:.2f}x of target); "
          f"ratio to floor {median / max(base, 1e-4):.0f}x")


if __name__ == "__main__":
    main()
