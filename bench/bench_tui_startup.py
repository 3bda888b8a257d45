"""Time from launch to the first painted frame of `yolotui` with 50 runs in the index, against a minimal
Textual app started the same way (a fresh interpreter on a pseudo terminal). Target: ratio <= 1.5.

Also prints the time until the 50 runs are in the table (they are read in a worker after the first frame).
Run: `python bench/bench_tui_startup.py [--repeats N]`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _tui_harness import child_env, make_runs, read_marks, spawn_in_pty

HARNESS = str(Path(__file__).resolve().parent / "_tui_harness.py")


def launch(mode: str, env: dict[str, str], scratch: Path) -> dict[str, float]:
    out = scratch / f"{mode}-{time.monotonic_ns()}.txt"
    start = time.time()
    proc = spawn_in_pty([sys.executable, HARNESS, mode, str(out)], env)
    proc.wait(timeout=60)
    marks = read_marks(out)
    return {name: value - start for name, value in marks.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        import os

        os.environ["YOLOTUI_HOME"] = str(scratch / "home")
        make_runs(scratch / "runs", args.runs)
        env = child_env(scratch / "home")
        launch("minimal", env, scratch)  # warm the file cache for both
        launch("home", env, scratch)
        minimal, home, loaded = [], [], []
        for _ in range(args.repeats):
            minimal.append(launch("minimal", env, scratch)["ready"])
            marks = launch("home", env, scratch)
            home.append(marks["ready"])
            loaded.append(marks["loaded"])
    base, ours, table = statistics.median(minimal), statistics.median(home), statistics.median(loaded)
    print(f"minimal Textual app, first frame:      {base * 1000:7.0f} ms (median of {args.repeats})")
    print(f"yolotui home ({args.runs} runs), first frame:  {ours * 1000:7.0f} ms")
    print(f"yolotui home, {args.runs} runs in the table:    {table * 1000:7.0f} ms")
    print(f"ratio first frame / minimal: {ours / base:.2f}x (target <= 1.5x)")
    print(f"ratio table filled / minimal: {table / base:.2f}x")


if __name__ == "__main__":
    main()
