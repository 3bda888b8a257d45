"""How a run's trainer is spread over processes and machines: torchrun's command line, checked before launch.

One process per listed GPU (`--device 0,1`), or `--nproc-per-node N` processes on the CPU (gloo; for tests and
for trying DDP without GPUs). Several machines join through torchrun's rendezvous: every node runs the same
`yolotui train` with `--nnodes N` and its own `--node-rank`, meeting at `--rdzv-endpoint HOST:PORT` (c10d
rendezvous) or at `--master-addr HOST --master-port PORT` (static rendezvous). The plan is stored in run.yaml
under `distributed`, so `yolotui resume` relaunches the same layout; flags given to resume replace the saved
ones. Torch-free: everything here runs before anything detaches. The flags themselves are registered by
yolotui.commands._distributed (argparse); here the layout is a plain dict of their dest names.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from yolotui.devices import split_device
from yolotui.errors import UserError

RUN_YAML_KEY = "distributed"

@dataclass(frozen=True)
class DistributedLaunch:
    """The process layout of one run: processes per node, nodes, and how the nodes meet."""

    nproc_per_node: int = 1
    nnodes: int = 1
    node_rank: int | None = None
    rdzv_endpoint: str | None = None
    rdzv_id: str | None = None
    master_addr: str | None = None
    master_port: int | None = None
    cuda_visible_devices: str | None = None  # the GPUs the processes of this node may see

    @property
    def world_size(self) -> int:
        """Processes in the whole job."""
        return self.nproc_per_node * self.nnodes

    @property
    def uses_torchrun(self) -> bool:
        """True when the trainer runs under torchrun (more than one process anywhere)."""
        return self.world_size > 1

    def torchrun_args(self) -> list[str]:
        """torchrun's options (between `-m torch.distributed.run` and the trainer's module)."""
        if self.nnodes == 1 and self.master_port is None and self.rdzv_endpoint is None:
            return ["--standalone", f"--nproc-per-node={self.nproc_per_node}"]
        args = [f"--nnodes={self.nnodes}", f"--nproc-per-node={self.nproc_per_node}"]
        if self.rdzv_endpoint:
            args += ["--rdzv-backend=c10d", f"--rdzv-endpoint={self.rdzv_endpoint}"]
            if self.rdzv_id:
                args.append(f"--rdzv-id={self.rdzv_id}")
            if self.node_rank is not None:
                args.append(f"--node-rank={self.node_rank}")
        else:
            args += [f"--node-rank={self.node_rank or 0}", f"--master-addr={self.master_addr or '127.0.0.1'}",
                     f"--master-port={self.master_port}"]
        return args

    def env(self) -> dict[str, str]:
        """Environment additions for the trainer (the GPUs this node's processes use, in local-rank order)."""
        return {"CUDA_VISIBLE_DEVICES": self.cuda_visible_devices} if self.cuda_visible_devices else {}

    def to_dict(self) -> dict[str, Any]:
        """Plain data for run.yaml."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> DistributedLaunch:
        """From run.yaml's `distributed` mapping (unknown keys ignored)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (data or {}).items() if k in known})


def saved_layout(run_dir: Path) -> dict[str, Any]:
    """The layout flags a run was last launched with (run.yaml's `distributed`), {} when none."""
    from yolotui.runs.runconfig import run_yaml_field

    saved = run_yaml_field(run_dir, RUN_YAML_KEY)
    flags = saved.get("flags") if isinstance(saved, dict) else None
    return dict(flags) if isinstance(flags, dict) else {}


def run_yaml_entry(launch: DistributedLaunch, flags: dict[str, Any] | None) -> dict[str, Any]:
    """What run.yaml keeps under `distributed`: the resolved layout and the flags it came from."""
    return {**launch.to_dict(), "flags": {k: v for k, v in (flags or {}).items() if v is not None}}


def _visible_devices(indices: list[int]) -> str:
    """CUDA_VISIBLE_DEVICES for the listed indices, composed with one already set (indices count within it)."""
    current = os.environ.get("CUDA_VISIBLE_DEVICES")
    if current is not None and current.strip():
        entries = [e.strip() for e in current.split(",") if e.strip()]
        return ",".join(entries[i] for i in indices if i < len(entries))
    return ",".join(str(i) for i in indices)


def plan_launch(device: str, batch_size: int, layout: dict[str, Any] | None = None) -> tuple[DistributedLaunch,
                                                                                             list[str]]:
    """The process layout for a run on `device` ('cpu' or '0,1' as validated) and the given layout flags.

    Returns (layout, warnings); UserError for a layout that cannot work, before anything detaches.
    """
    layout = {k: v for k, v in (layout or {}).items() if v is not None}
    warnings: list[str] = []
    gpus = split_device(device) or []
    nproc = layout.get("nproc_per_node")
    if nproc is not None and int(nproc) < 1:
        raise UserError(f"--nproc-per-node {nproc}: must be at least 1")
    if gpus:
        if nproc is not None and int(nproc) != len(gpus):
            raise UserError(f"--nproc-per-node {nproc} with --device {device}: yolotui runs one process per listed "
                            f"GPU; list {nproc} GPUs (e.g. --device {','.join(str(i) for i in range(int(nproc)))}) "
                            "or leave out --nproc-per-node")
        nproc = len(gpus)
    nproc = int(nproc or 1)
    nnodes = int(layout.get("nnodes") or 1)
    if nnodes < 1:
        raise UserError(f"--nnodes {nnodes}: must be at least 1")
    node_rank = layout.get("node_rank")
    if nnodes == 1 and node_rank not in (None, 0):
        raise UserError(f"--node-rank {node_rank}: a single-node job has only node 0; add --nnodes")
    if node_rank is not None and not 0 <= int(node_rank) < nnodes:
        raise UserError(f"--node-rank {node_rank}: must be between 0 and --nnodes - 1 ({nnodes - 1})")
    endpoint, master_addr, master_port = (layout.get("rdzv_endpoint"), layout.get("master_addr"),
                                          layout.get("master_port"))
    if endpoint and (master_addr or master_port):
        raise UserError("--rdzv-endpoint and --master-addr/--master-port are two ways to meet: give one")
    if endpoint and ":" not in str(endpoint):
        raise UserError(f"--rdzv-endpoint {endpoint}: give HOST:PORT, e.g. node0.example:29400")
    if layout.get("rdzv_id") and not endpoint:
        raise UserError("--rdzv-id goes with --rdzv-endpoint")
    if master_port is not None and not 0 < int(master_port) < 65536:
        raise UserError(f"--master-port {master_port}: not a TCP port")
    if master_addr and master_port is None:
        raise UserError("--master-addr needs --master-port (a free port on that machine, e.g. 29500)")
    if nnodes > 1:
        if not endpoint and not master_addr:
            raise UserError(f"--nnodes {nnodes}: say where the nodes meet: --rdzv-endpoint HOST:PORT (or "
                            "--master-addr HOST --master-port PORT), the same on every node")
        if master_addr and node_rank is None:
            raise UserError("--master-addr: give each node its --node-rank (0 on the master's machine)")
    result = DistributedLaunch(nproc_per_node=nproc, nnodes=nnodes,
                               node_rank=int(node_rank) if node_rank is not None else None,
                               rdzv_endpoint=str(endpoint) if endpoint else None,
                               rdzv_id=str(layout["rdzv_id"]) if layout.get("rdzv_id") else None,
                               master_addr=str(master_addr) if master_addr else None,
                               master_port=int(master_port) if master_port is not None else None,
                               cuda_visible_devices=_visible_devices(gpus) if len(gpus) > 1 else None)
    if int(batch_size) % result.world_size:
        raise UserError(f"--batch-size {batch_size} must be a multiple of the {result.world_size} training "
                        "processes (each process takes an equal share)")
    return result, warnings


def sync_bn_warning(sync_bn: bool, device: str, launch: DistributedLaunch) -> str | None:
    """Why --sync-bn will have no effect, or None when it will convert BatchNorm layers."""
    if not sync_bn:
        return None
    if not launch.uses_torchrun:
        return "--sync-bn has no effect with a single process (it synchronises BatchNorm across DDP processes)"
    if not split_device(device):
        return "--sync-bn has no effect on the CPU (torch's SyncBatchNorm runs on GPUs only); BatchNorm stays local"
    return None
