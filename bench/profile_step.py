"""Profile one yolotui training step (forward + loss + backward + SGD step) with torch.profiler.

Prints the ops that take the most self CPU time (or CUDA time on a GPU), so a change to the model, the loss or
the memory format can be judged by where the time goes rather than by a noisy end-to-end rate.

Usage: python bench/profile_step.py [--cfg gelan-t] [--imgsz 320] [--batch 8] [--threads 2] [--steps 3]
       [--contiguous] [--rows 25]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cfg", default="gelan-t")
    parser.add_argument("--imgsz", type=int, default=320)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3, help="profiled steps (after two warm-up steps)")
    parser.add_argument("--device", default="cuda" if _cuda() else "cpu")
    parser.add_argument("--contiguous", action="store_true", help="contiguous memory format instead of the trainer's")
    parser.add_argument("--rows", type=int, default=25)
    args = parser.parse_args()

    import torch
    from torch.profiler import ProfilerActivity, profile

    from yolotui.config import load_hyp
    from yolotui.configs import resolve_hyp
    from yolotui.engine.loss.yolo_loss import loss_for_model
    from yolotui.engine.model import build_model
    from yolotui.engine.train.memory_format import prepare_for_training, training_memory_format

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = prepare_for_training(build_model(args.cfg, nc=5), device).train()
    fmt = torch.contiguous_format if args.contiguous else training_memory_format(device)
    model = model.to(memory_format=fmt)
    loss_fn = loss_for_model(model, load_hyp(resolve_hyp(None)), 0.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.937, nesterov=True)
    g = torch.Generator().manual_seed(0)
    imgs = torch.rand(args.batch, 3, args.imgsz, args.imgsz, generator=g).to(device).contiguous(memory_format=fmt)
    targets = torch.cat([torch.tensor([[i, i % 5, 0.5, 0.5, 0.3, 0.4], [i, (i + 1) % 5, 0.25, 0.3, 0.2, 0.2]])
                         for i in range(args.batch)]).to(device)

    def step() -> None:
        loss, _ = loss_fn(model(imgs), targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()
    step()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(args.steps):
            step()
        if device.type == "cuda":
            torch.cuda.synchronize()
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(f"{args.cfg}, {args.imgsz} px, batch {args.batch}, {args.threads} threads, {device}, "
          f"{'contiguous' if args.contiguous else 'training memory format'}, {args.steps} steps:")
    print(prof.key_averages().table(sort_by=key, row_limit=args.rows))
    return 0


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


if __name__ == "__main__":
    sys.exit(main())
