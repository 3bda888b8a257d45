"""Benchmark: `yolotui ls` with 200 SLURM runs, as a ratio to `yolotui ls` with 200 local runs.

Each SLURM run's state comes from its job: `ls` asks squeue once for all of them (cached per process), so the
ratio should stay near 1 plus one squeue call. Needs squeue on PATH (a SLURM login node, or .ci/slurm-up).
Usage: python bench/bench_slurm_ls.py [--runs 200] [--repeat 11]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ls import REPO, make_fixture, medians  # noqa: E402

from yolotui.runs.status import read_status, write_status  # noqa: E402


def make_slurm_fixture(root: Path, runs: int) -> None:
    """As bench_ls's fixture, each run recorded as a live SLURM job (ids squeue does not know: interrupted)."""
    make_fixture(root, runs)
    for i, run_dir in enumerate(sorted((root / "proj").iterdir())):
        status = read_status(run_dir)
        status.state, status.slurm = "running", {"job_id": str(900000 + i)}
        write_status(run_dir, status)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=11)
    args = parser.parse_args()
    if shutil.which("squeue") is None:
        print("squeue not found: run on a SLURM login node or after .ci/slurm-up")
        return 2
    times = {}
    for label, maker in (("local", make_fixture), ("slurm", make_slurm_fixture)):
        with tempfile.TemporaryDirectory(prefix="yolotui-bench-") as tmp:
            os.environ["YOLOTUI_HOME"] = str(Path(tmp) / "home")
            maker(Path(tmp), args.runs)
            env = dict(os.environ)
            env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
            env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
            times[label] = medians({"ls": [sys.executable, "-m", "yolotui", "ls"]}, env, args.repeat)["ls"]
    print(f"yolotui ls, {args.runs} local runs: {times['local'] * 1000:7.1f} ms (median of {args.repeat})")
    print(f"yolotui ls, {args.runs} SLURM runs: {times['slurm'] * 1000:7.1f} ms  "
          f"ratio {times['slurm'] / times['local']:.2f}x (one squeue call for all)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
