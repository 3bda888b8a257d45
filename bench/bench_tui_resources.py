"""CPU (% of one core) and RSS of the TUI watching a running run. Targets: CPU <= 3 %, RSS <= 150 MB.

The dashboard of a fixture run runs as a real process on a pseudo terminal while this script plays the
trainer: 4 batch events a second (the trainer's throttle), a log line a second, and an epoch (event and
results row, so both charts redraw) every 5 s, far more often than real epochs. `--epoch-s 0.5` is a stress
setting.
Baseline, measured the same way in the same run: a minimal Textual app idling on its own pseudo terminal.
Run: `python bench/bench_tui_resources.py [--seconds S]`.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
from _tui_harness import child_env, read_marks, spawn_in_pty

HARNESS = str(Path(__file__).resolve().parent / "_tui_harness.py")


def measure(argv: list[str], env: dict[str, str], marks_file: Path, seconds: float) -> tuple[float, float]:
    """CPU % of one core over `seconds` (after the first frame plus 3 s to settle) and the RSS at the end."""
    proc = spawn_in_pty(argv, {**env, "LINGER": "3600"})
    try:
        deadline = time.time() + 60
        while "loaded" not in read_marks(marks_file) and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(3.0)
        process = psutil.Process(proc.pid)
        before, start = process.cpu_times(), time.monotonic()
        threads_before = {t.id: t.user_time + t.system_time for t in process.threads()}
        time.sleep(seconds)
        after, elapsed = process.cpu_times(), time.monotonic() - start
        if os.environ.get("THREADS"):
            for t in process.threads():
                used = t.user_time + t.system_time - threads_before.get(t.id, 0.0)
                print(f"  thread {t.id}: {100 * used / elapsed:.2f} %", file=sys.stderr)
        rss = process.memory_info().rss / 2**20
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    busy = (after.user - before.user) + (after.system - before.system)
    return 100.0 * busy / elapsed, rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--batch-hz", type=float, default=4.0, help="batch events a second (trainers throttle to a few)")
    parser.add_argument("--epoch-s", type=float, default=5.0, help="seconds per epoch (real ones take minutes)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        os.environ["YOLOTUI_HOME"] = str(scratch / "home")
        from tui_fixtures import make_run, write_epoch

        from yolotui.runs.events import EventWriter

        run = make_run(scratch / "runs", "watched", state="running", epochs=100_000, done_epochs=20,
                       hold_lock=True)
        env = child_env(scratch / "home")
        stop = threading.Event()

        def trainer() -> None:
            """Batch events at --batch-hz, a log line a second, an epoch (event, results row) every --epoch-s."""
            writer = EventWriter(run.path / "events.jsonl", attempt=1)
            epoch, batch, batches = 20, 0, max(1, round(args.epoch_s * args.batch_hz))
            last_log = time.monotonic()
            while not stop.is_set():
                writer.emit("batch", epoch=epoch, epochs=100_000, batch=batch, batches=batches,
                            losses={"box": 1.0, "cls": 1.0, "dfl": 1.0}, lr=0.01, imgs_per_s=64.0, gpu_mem_gb=1.0)
                batch += 1
                if batch >= batches:
                    write_epoch(run.path, writer, epoch, 100_000, batches=batches)
                    epoch, batch = epoch + 1, 0
                if time.monotonic() - last_log >= 1.0:
                    last_log = time.monotonic()
                    with open(run.path / "train.log", "a") as log:
                        log.write(f"epoch {epoch} batch {batch}/{batches}\n")
                time.sleep(1.0 / args.batch_hz)

        baseline_cpu, baseline_rss = measure([sys.executable, HARNESS, "minimal", str(scratch / "m.txt")], env,
                                             scratch / "m.txt", args.seconds)
        thread = threading.Thread(target=trainer, daemon=True)
        thread.start()
        try:
            cpu, rss = measure([sys.executable, HARNESS, "attach", str(scratch / "a.txt"), str(run.path)], env,
                               scratch / "a.txt", args.seconds)
        finally:
            stop.set()
            thread.join()
            run.release()
    print(f"minimal Textual app, idle:          CPU {baseline_cpu:5.2f} % of a core, RSS {baseline_rss:6.1f} MB")
    print(f"yolotui dashboard ({args.batch_hz:g} batch events/s, an epoch every {args.epoch_s:g} s): CPU {cpu:5.2f} % of a core, RSS {rss:6.1f} MB "
          f"(over {args.seconds:.0f} s)")
    print(f"CPU target <= 3 %: {'met' if cpu <= 3 else 'MISSED'}; RSS target <= 150 MB: "
          f"{'met' if rss <= 150 else 'MISSED'}; ratio to minimal: CPU {cpu / max(baseline_cpu, 0.01):.1f}x, "
          f"RSS {rss / baseline_rss:.2f}x")


if __name__ == "__main__":
    main()
