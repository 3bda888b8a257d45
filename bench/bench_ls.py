"""Benchmark: `yolotui ls` with 200 runs in the index, as a ratio to `python -c pass` run the same way.

Target: at most 3x. Usage: python bench/bench_ls.py [--runs 200] [--repeat 15]
Each fixture run has status.json, a results.csv of 10 epochs, a short events.jsonl and a last.pt stub.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from yolotui.runs import index  # noqa: E402
from yolotui.runs.events import EventWriter  # noqa: E402
from yolotui.runs.results import append_row  # noqa: E402
from yolotui.runs.status import RunStatus, write_status  # noqa: E402
from yolotui.runs.store import create_run_dir  # noqa: E402


def make_fixture(root: Path, runs: int) -> None:
    """Index `runs` finished runs under root/proj."""
    for i in range(runs):
        run_dir = create_run_dir(root / "proj", f"run{i:03d}")
        status = RunStatus(name=run_dir.name, run_dir=str(run_dir), state="finished", attempt=1,
                           started=time.time() - 3600, ended=time.time(), device="0", exit_code=0,
                           command=["python", "train.py"])
        write_status(run_dir, status)
        writer = EventWriter(run_dir / "events.jsonl")
        for epoch in range(10):
            append_row(run_dir / "results.csv", epoch, [0.1 * epoch] * 13)
            writer.emit("epoch", epoch=epoch, epochs=10, metrics={"mAP50-95": 0.1 * epoch})
        (run_dir / "weights" / "last.pt").write_bytes(b"stub")
        index.add(run_dir, run_dir.name)


def run_once(argv: list[str], env: dict[str, str]) -> float:
    """Wall time of running `argv` once as a subprocess."""
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{argv} failed: {proc.stderr.decode()}")
    return elapsed


def medians(commands: dict[str, list[str]], env: dict[str, str], repeat: int) -> dict[str, float]:
    """Median wall time of each command, run in interleaved rounds so machine load hits them alike."""
    for argv in commands.values():
        run_once(argv, env)  # warm-up: compiles the byte code, fills the page cache
    times: dict[str, list[float]] = {label: [] for label in commands}
    for _ in range(repeat):
        for label, argv in commands.items():
            times[label].append(run_once(argv, env))
    return {label: statistics.median(values) for label, values in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=21)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="yolotui-bench-") as tmp:
        os.environ["YOLOTUI_HOME"] = str(Path(tmp) / "home")
        make_fixture(Path(tmp), args.runs)
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        # As installed: byte code cached (kept out of the checkout), the way pip leaves a package.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        result = medians({
            "pass": [sys.executable, "-c", "pass"],
            "floor": [sys.executable, "-c", "import argparse, json, pathlib"],
            "ls": [sys.executable, "-m", "yolotui", "ls"],
            "json": [sys.executable, "-m", "yolotui", "ls", "--json"],
        }, env, args.repeat)
    baseline = result["pass"]
    print(f"python -c pass        : {baseline * 1000:7.1f} ms (median of {args.repeat}, interleaved)")
    print(f"import argparse/json/pathlib: {result['floor'] * 1000:5.1f} ms  ratio {result['floor'] / baseline:.2f}x "
          "(what any argparse CLI pays)")
    print(f"yolotui ls ({args.runs} runs): {result['ls'] * 1000:7.1f} ms  "
          f"ratio {result['ls'] / baseline:.2f}x (target <= 3x)")
    print(f"yolotui ls --json     : {result['json'] * 1000:7.1f} ms  ratio {result['json'] / baseline:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
