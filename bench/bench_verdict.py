"""Verdict time for a ~100 MB checkpoint, as a ratio to torch.load of the same file.

    python bench/bench_verdict.py [--mb 100] [--repeat 5]

Writes a yolotui-format checkpoint (model + EMA + SGD momentum, manifest beside it) to a temporary
folder, then times, with the file in the page cache for both:
- diagnose_checkpoint(path): zip CRCs of every member, pickle opcode walk, manifest sha256 check;
- the same without the sha256 check (what the TUI's periodic refresh can use);
- torch.load(path, weights_only=True) (the baseline: what a resume has to do anyway).
Prints the medians and the ratios (lower is better; < 1 means the torch-free verdict is faster).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import tempfile
import time
from collections import OrderedDict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def build_checkpoint(path: Path, megabytes: int) -> None:
    """A checkpoint of about `megabytes` MB: 3 copies (model, ema, momentum) of a many-tensor state dict."""
    import torch

    torch.manual_seed(0)
    per_copy = megabytes * 1_000_000 // 3 // 4  # float32 elements per copy
    shapes = []
    remaining = per_copy
    i = 0
    while remaining > 0:  # conv-like tensors of varied sizes, ~1200 tensors a copy, like a YOLOv9-c state dict
        n = min(remaining, [64 * 64 * 9, 256, 256, 256, 256, 4096][i % 6])  # conv weight, BN vectors
        shapes.append(n)
        remaining -= n
        i += 1
    model = OrderedDict((f"model.{k}.weight", torch.randn(n)) for k, n in enumerate(shapes))
    ema = OrderedDict((k, v.clone()) for k, v in model.items())
    optimizer = {"state": {k: {"momentum_buffer": v.clone()} for k, v in enumerate(model.values())},
                 "param_groups": [{"lr": 0.01, "momentum": 0.937, "params": list(range(len(model)))}]}
    ckpt = {"format": "yolotui-1", "epoch": 5, "step": 0, "epochs": 100, "model": model, "ema": ema, "updates": 500,
            "optimizer": optimizer, "scheduler": {"last_epoch": 5}, "scaler": None, "rng": {}, "best_fitness": 0.3,
            "opt": {"epochs": 100}, "hyp": {"lr0": 0.01}, "versions": {"torch": str(torch.__version__)},
            "date": "2026-12-02"}
    torch.save(ckpt, path)
    data = path.read_bytes()
    manifest = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "epoch": 5, "step": 0}
    Path(str(path) + ".json").write_text(json.dumps(manifest))


def timed(func, repeat: int) -> float:
    """Median wall time of `func()` over `repeat` runs (after one warm-up)."""
    func()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> int:
    """Build, time, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    from yolotui.health.verdict import diagnose_checkpoint

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "last.pt"
        build_checkpoint(path, args.mb)
        size_mb = path.stat().st_size / 1e6
        verdict = diagnose_checkpoint(path)
        assert verdict.verdict == "resumable", verdict.reasons
        t_full = timed(lambda: diagnose_checkpoint(path), args.repeat)
        t_quick = timed(lambda: diagnose_checkpoint(path, verify_hash=False), args.repeat)
        t_load = timed(lambda: torch.load(path, map_location="cpu", weights_only=True), args.repeat)
    print(f"checkpoint: {size_mb:.1f} MB, {verdict.info.keys.__len__()} keys")
    print(f"torch.load(weights_only=True):      {t_load * 1000:8.1f} ms  (baseline)")
    print(f"diagnose_checkpoint (CRC + sha256): {t_full * 1000:8.1f} ms  ratio {t_full / t_load:.2f}")
    print(f"diagnose_checkpoint (CRC only):     {t_quick * 1000:8.1f} ms  ratio {t_quick / t_load:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
