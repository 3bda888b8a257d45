"""`--slurm` and its options for train, resume, finetune and exec: submit the run as a SLURM job.

Only argparse wiring: the options become a yolotui.placement.slurm.SlurmOptions (over settings.yaml's `slurm:`
defaults) that the launcher uses instead of starting the supervisor on this machine.
"""

from __future__ import annotations

import argparse
from typing import Any

_OPTIONS = ("partition", "gres", "gpus", "nodes", "ntasks_per_node", "cpus_per_task", "time", "account", "qos")


def add_slurm_flags(parser: argparse.ArgumentParser) -> None:
    """Register --slurm and the #SBATCH options (each implies --slurm)."""
    group = parser.add_argument_group("SLURM", "submit the run as a SLURM job (defaults: settings.yaml `slurm:`)")
    group.add_argument("--slurm", action="store_true", help="run the supervisor as a SLURM job (sbatch RUN/slurm.sh)")
    group.add_argument("--partition", default=None, help="SLURM partition (#SBATCH --partition)")
    group.add_argument("--gres", default=None, help="generic resources, e.g. gpu:4")
    group.add_argument("--gpus", default=None, help="GPUs for the job, e.g. 4 or a100:4")
    group.add_argument("--nodes", type=int, default=None, help="nodes; above 1 runs torchrun on each via srun")
    group.add_argument("--ntasks-per-node", type=int, default=None, help="#SBATCH --ntasks-per-node")
    group.add_argument("--cpus-per-task", type=int, default=None, help="#SBATCH --cpus-per-task")
    group.add_argument("--time", default=None, help="time limit, e.g. 1-00:00:00 or 120 (minutes)")
    group.add_argument("--account", default=None, help="#SBATCH --account")
    group.add_argument("--qos", default=None, help="#SBATCH --qos")
    group.add_argument("--sbatch-arg", dest="sbatch_args", action="append", default=None, metavar="ARG",
                       help="any other sbatch option, one per flag: --sbatch-arg=--mem=64G (repeatable)")
    group.add_argument("--slurm-signal-lead", dest="signal_lead_s", type=int, default=None, metavar="S",
                       help="seconds before the time limit to checkpoint and requeue (default 300)")


def slurm_options(args: argparse.Namespace) -> Any | None:
    """The SlurmOptions the flags ask for, or None for a local run; UserError on bad values."""
    given = {key: getattr(args, key, None) for key in (*_OPTIONS, "sbatch_args", "signal_lead_s")}
    if not getattr(args, "slurm", False) and not any(v is not None for v in given.values()):
        return None
    from yolotui.placement.slurm import make_options

    return make_options(given)
