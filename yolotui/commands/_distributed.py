"""The process-layout flags (torchrun's spellings) of train, resume, finetune and demo.

The layout itself (DistributedLaunch, plan_launch, what run.yaml keeps) is yolotui.placement.distributed.
"""

from __future__ import annotations

import argparse
from typing import Any

# (flags, argparse keyword arguments): torchrun's own spellings, so its documentation applies.
DISTRIBUTED_FLAGS: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (("--nproc-per-node", "--nproc"), {"dest": "nproc_per_node", "type": int, "metavar": "N",
                                       "help": "processes on this machine (default: one per --device GPU; "
                                               "with --device cpu, N CPU processes on gloo)"}),
    (("--nnodes",), {"type": int, "metavar": "N", "help": "machines in the job (multi-node; default 1)"}),
    (("--node-rank",), {"type": int, "metavar": "K", "help": "this machine's rank, 0..nnodes-1"}),
    (("--rdzv-endpoint",), {"metavar": "HOST:PORT", "help": "rendezvous point (c10d) every node can reach"}),
    (("--rdzv-id",), {"metavar": "ID", "help": "job id shared by the nodes of one job (with --rdzv-endpoint)"}),
    (("--master-addr",), {"metavar": "HOST", "help": "static rendezvous: node 0's address"}),
    (("--master-port",), {"type": int, "metavar": "PORT", "help": "static rendezvous: node 0's free port"}),
]


def add_distributed_flags(parser: argparse.ArgumentParser, hidden: bool = False) -> None:
    """Register the process-layout flags (SUPPRESS defaults: `given_layout(args)` holds only those given)."""
    for flags, kwargs in DISTRIBUTED_FLAGS:
        options = {**kwargs, "default": argparse.SUPPRESS}
        if hidden:
            options["help"] = argparse.SUPPRESS
        parser.add_argument(*flags, **options)


def given_layout(args: argparse.Namespace) -> dict[str, Any]:
    """The process-layout flags present on the command line, under their dest names."""
    names = {kwargs.get("dest") or flags[0].lstrip("-").replace("-", "_") for flags, kwargs in DISTRIBUTED_FLAGS}
    return {k: v for k, v in vars(args).items() if k in names}
