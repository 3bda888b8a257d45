"""SLURM as the place where a run's supervisor runs: the batch script, submission, job state, control.

This is a launcher, not a trainer backend: `yolotui train|resume|finetune|exec --slurm` writes the same run.yaml
as a local launch, then, instead of starting the supervisor here, writes RUN/slurm.sh and submits it with
`sbatch`. The job `exec`s `python -m yolotui.supervisor.slurm_job RUN` (the supervisor, in the foreground of the batch
step), so SLURM's batch-shell signals reach the supervisor itself:

- `--signal=B:USR1@N` (N = `signal_lead_s`): before the time limit the supervisor stops the trainer gracefully
  (checkpoint at the next step), records the attempt as `timelimit` and requeues the job itself
  (`scontrol requeue`); SLURM never requeues a job that reached its limit on its own. The requeued job
  resumes from weights/last.pt.
- `yolotui stop` writes stop.request, then `scancel --batch --signal=TERM` (the supervisor stops the trainer:
  checkpoint, then the job ends as `stopped`); `--force` is a plain `scancel`.
- `yolotui save` writes save.request, then `scancel --batch --signal=USR1`: the request file tells the
  supervisor that this USR1 is a save, not the time limit.

Liveness of a SLURM run is its job's state (squeue; sacct where accounting exists), never RUN/.lock, which
may sit on NFS and is held on another machine. Every SLURM command runs with a timeout, and `squeue` answers
are cached for a few seconds per process, for all of the user's jobs at once, so `yolotui ls` over many runs
costs one call. Nothing here imports torch.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from yolotui.errors import UserError
from yolotui.runs.slurm_state import _CACHE, QUERY_TIMEOUT_S, _run

SCRIPT = "slurm.sh"
SLURM_LOG = "slurm.log"
SAVE_REQUEST = "save.request"
DEFAULT_SIGNAL_LEAD_S = 300
DEFAULT_RDZV_PORT = 29500
SETTINGS_MAX_BYTES = 256 * 1024

# SLURM job states, grouped as yolotui reads them.
# File systems that every node of a cluster usually mounts; anything else is presumed local to one machine.
SHARED_FS = frozenset({"nfs", "nfs4", "lustre", "gpfs", "beegfs", "cephfs", "ceph", "glusterfs", "fuse.glusterfs",
                       "cifs", "smb3", "fuse.sshfs", "panfs", "wekafs", "fuse.juicefs", "orangefs", "pvfs2",
                       "9p", "virtiofs", "fuse.ceph-fuse", "fuse.lizardfs", "fuse.moosefs", "afs", "ocfs2", "gfs2"})


@dataclass
class SlurmOptions:
    """What goes on the job's `#SBATCH` lines; None leaves a setting to SLURM (or the cluster's defaults)."""

    partition: str | None = None
    gres: str | None = None
    gpus: str | None = None
    nodes: int = 1
    ntasks_per_node: int | None = None
    cpus_per_task: int | None = None
    time: str | None = None
    account: str | None = None
    qos: str | None = None
    sbatch_args: list[str] = field(default_factory=list)
    signal_lead_s: int = DEFAULT_SIGNAL_LEAD_S
    requeue: bool = True

    def to_record(self) -> dict[str, Any]:
        """The run.yaml form."""
        return asdict(self)

    @classmethod
    def from_record(cls, data: dict[str, Any] | None) -> SlurmOptions:
        """Back from run.yaml's `slurm.options` (unknown keys ignored)."""
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in (data or {}).items() if k in known})


# ------------------------------------------------------------------------------------------- options
def settings_defaults() -> dict[str, Any]:
    """The `slurm:` mapping of the user's settings.yaml (partition, account, time ...), or {}.

    UserError naming the file when it is unreadable or the mapping is malformed.
    """
    import yaml

    from yolotui.usersettings import read_yaml_mapping, settings_file

    path = settings_file()
    try:
        with open(path, "rb") as handle:
            head = handle.read(SETTINGS_MAX_BYTES + 1)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror})") from exc
    if b"&" in head and b"*" in head and len(head) <= SETTINGS_MAX_BYTES:
        # a settings file has no need of aliases (safe_yaml bounds them; here they are refused outright)
        try:
            events = list(yaml.parse(head.decode("utf-8", errors="replace")))
        except yaml.YAMLError:
            events = []
        if any(isinstance(event, yaml.AliasEvent) for event in events):
            raise UserError(f"{path}: YAML aliases (*name) are not allowed in settings; write the values out")
    settings = read_yaml_mapping(path, "settings", SETTINGS_MAX_BYTES)  # size, syntax and line, a mapping
    slurm = settings.get("slurm")
    if slurm is None:
        return {}
    if not isinstance(slurm, dict):
        raise UserError(f"{path}: 'slurm' must be a mapping (partition: gpu, time: '1-00:00:00' ...)")
    return slurm


def settings_has_slurm() -> bool:
    """True when the user's settings.yaml has a `slurm:` key (the TUI then offers SLURM in its wizards)."""
    from yolotui.runs.index import config_dir

    try:
        with open(config_dir() / "settings.yaml", "rb") as handle:
            head = handle.read(SETTINGS_MAX_BYTES)
    except OSError:
        return False
    return any(line.startswith(b"slurm:") for line in head.splitlines())


def make_options(given: dict[str, Any], defaults: dict[str, Any] | None = None) -> SlurmOptions:
    """SlurmOptions from flags given (None = not given) over settings.yaml's defaults; UserError on bad values."""
    defaults = settings_defaults() if defaults is None else defaults
    unknown = sorted(set(defaults) - set(SlurmOptions.__dataclass_fields__))
    if unknown:
        raise UserError(f"settings.yaml slurm: unknown key(s) {', '.join(unknown)}; known: "
                        + ", ".join(sorted(SlurmOptions.__dataclass_fields__)))
    merged: dict[str, Any] = dict(defaults)
    for key, value in given.items():
        if value is None or value == []:
            continue
        if key == "sbatch_args":
            merged[key] = [*(merged.get(key) or []), *value]
        else:
            merged[key] = value
    opts = SlurmOptions.from_record(merged)
    for name in ("partition", "gres", "gpus", "time", "account", "qos"):
        value = getattr(opts, name)
        if value is not None:
            text = str(value)
            if not text or any(ch.isspace() for ch in text):
                raise UserError(f"--{name.replace('_', '-')} {text!r}: must be one word without spaces")
            setattr(opts, name, text)
    for name in ("nodes", "ntasks_per_node", "cpus_per_task"):
        value = getattr(opts, name)
        if value is not None and (not isinstance(value, int) or value < 1):
            raise UserError(f"--{name.replace('_', '-')} {value!r}: must be a whole number of at least 1")
    if not isinstance(opts.signal_lead_s, int) or opts.signal_lead_s < 1:
        raise UserError(f"--slurm-signal-lead {opts.signal_lead_s!r}: must be a whole number of seconds >= 1")
    args = [str(a) for a in opts.sbatch_args or []]
    for arg in args:
        if not arg.startswith("-") or "\n" in arg or "\r" in arg:
            raise UserError(f"--sbatch-arg {arg!r}: give one sbatch option per flag, e.g. --sbatch-arg=--mem=64G")
    opts.sbatch_args = args
    return opts


def recorded_options(run_dir: Path) -> SlurmOptions | None:
    """The SLURM options run.yaml recorded for the run's last submission, or None for a local run."""
    from yolotui.runs.runconfig import run_yaml_field

    record = run_yaml_field(Path(run_dir), "slurm")
    if not isinstance(record, dict) or not isinstance(record.get("options"), dict):
        return None
    return SlurmOptions.from_record(record["options"])


# --------------------------------------------------------------------------------------- the script
def _torchrun_split(command: list[str]) -> tuple[list[str], list[str], list[str]] | None:
    """(python, torchrun args, rest from `-m yolotui.engine` on) of a torchrun command, else None."""
    try:
        at = command.index("torch.distributed.run")
    except ValueError:
        return None
    if at < 2 or command[at - 1] != "-m":
        return None
    rest_at = next((i for i in range(at + 1, len(command) - 1) if command[i] == "-m"), None)
    if rest_at is None:
        return None
    return command[: at - 1], command[at + 1: rest_at], command[rest_at:]


_NODE_LAYOUT_FLAGS = ("--nnodes", "--node-rank", "--node_rank", "--rdzv-endpoint", "--rdzv_endpoint",
                      "--rdzv-backend", "--rdzv_backend", "--rdzv-id", "--rdzv_id", "--master-addr",
                      "--master_addr", "--master-port", "--master_port", "--standalone")


def multi_node_command(command: list[str], nproc_per_node: int | str | None = None) -> list[str]:
    """The trainer command for a job over several nodes: `srun` starts one torchrun per node.

    The node layout flags of a local torchrun command are dropped: torchrun reads them from the PET_*
    variables slurm.sh exports (nodes from SLURM_JOB_NUM_NODES, the first node of SLURM_JOB_NODELIST as the
    rendezvous endpoint, SLURM_JOB_ID as the rendezvous id). A command that is not torchrun's is wrapped whole.
    """
    srun = ["srun", "--ntasks-per-node=1", "--kill-on-bad-exit=1", "--export=ALL"]
    split = _torchrun_split(command)
    if split is None:
        if command[1:3] != ["-m", "yolotui.engine"]:
            return [*srun, *command]  # some other program: one per node, as it is
        python, torchrun_args, rest = command[:1], [], command[1:]
    else:
        python, torchrun_args, rest = split
    kept: list[str] = []
    i = 0
    while i < len(torchrun_args):
        token = torchrun_args[i]
        name = token.split("=", 1)[0]
        if name in _NODE_LAYOUT_FLAGS:
            takes_value = "=" not in token and name != "--standalone"
            i += 2 if takes_value else 1
            continue
        kept.append(token)
        i += 1
    if nproc_per_node is not None and not any(t.split("=", 1)[0] in ("--nproc-per-node", "--nproc_per_node")
                                              for t in kept):
        kept = ["--nproc-per-node", str(nproc_per_node), *kept]
    return [*srun, *python, "-m", "torch.distributed.run", *kept, *rest]


def script_text(run_dir: Path, opts: SlurmOptions, name: str, python: str | None = None,
                pythonpath: str | None = None) -> str:
    """The text of RUN/slurm.sh: #SBATCH lines, then `exec` of the supervisor in the foreground."""
    run_dir = Path(run_dir)
    python = python or sys.executable
    lines = [
        "#!/bin/bash",
        f"# yolotui run {name}: a SLURM job that supervises the run folder {run_dir}.",
        f"# Submit it again by hand with: sbatch {shlex.quote(str(run_dir / SCRIPT))}",
        f"#SBATCH --job-name=yolotui-{name}",
        f"#SBATCH --chdir={run_dir}",
        f"#SBATCH --output={run_dir / SLURM_LOG}",
        f"#SBATCH --error={run_dir / SLURM_LOG}",
        "#SBATCH --open-mode=append",
        f"#SBATCH --signal=B:USR1@{int(opts.signal_lead_s)}",
    ]
    if opts.requeue:
        lines.append("#SBATCH --requeue")
    for flag, value in (("partition", opts.partition), ("gres", opts.gres), ("gpus", opts.gpus),
                        ("nodes", opts.nodes), ("ntasks-per-node", opts.ntasks_per_node),
                        ("cpus-per-task", opts.cpus_per_task), ("time", opts.time),
                        ("account", opts.account), ("qos", opts.qos)):
        if value is not None:
            lines.append(f"#SBATCH --{flag}={value}")
    lines += [f"#SBATCH {arg}" for arg in opts.sbatch_args]
    lines += [
        "",
        "set -eu",
        'echo "yolotui: job $SLURM_JOB_ID (restart ${SLURM_RESTART_COUNT:-0}) on $(hostname) at $(date)"',
    ]
    if pythonpath:
        lines.append(f"export PYTHONPATH={shlex.quote(pythonpath)}${{PYTHONPATH:+:$PYTHONPATH}}")
    if (opts.nodes or 1) > 1:
        lines += [
            "# several nodes: torchrun on each node (started by srun) meets at the first node of the job",
            'export PET_NNODES="$SLURM_JOB_NUM_NODES"',
            "export PET_RDZV_BACKEND=c10d",
            'export PET_RDZV_ENDPOINT="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1):'
            f'{DEFAULT_RDZV_PORT}"',
            'export PET_RDZV_ID="$SLURM_JOB_ID"',
        ]
    lines += [
        "# the supervisor replaces this shell, so SLURM's batch-shell signals (time limit, stop, save) reach it",
        f"exec {shlex.quote(python)} -m yolotui.supervisor.slurm_job {shlex.quote(str(run_dir))} "
        f">> {shlex.quote(str(run_dir / 'supervisor.log'))} 2>&1",
        "",
    ]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ storage
def _mount_of(path: Path) -> tuple[str, str]:
    """(mount point, file system type) of the mount that holds `path`, from /proc/mounts."""
    best = ("/", "unknown")
    target = str(Path(path).resolve())
    try:
        with open("/proc/mounts", encoding="utf-8", errors="replace") as handle:
            mounts = handle.read(4 * 1024 * 1024).splitlines()
    except OSError:
        return best
    for line in mounts:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        if (target == point or target.startswith(point.rstrip("/") + "/")) and len(point) >= len(best[0]):
            best = (point, parts[2])
    return best


def cluster_nodes() -> list[str] | None:
    """The cluster's node names (sinfo), or None when sinfo cannot answer."""
    out = _run(["sinfo", "-h", "-N", "-o", "%N"])
    if out is None:
        return None
    return sorted({line.strip() for line in out.splitlines() if line.strip()})


def storage_note(run_dir: Path, nodes: list[str] | None = None) -> tuple[str, bool]:
    """(what to tell the user about the run folder's storage, whether it is a warning).

    On a one-node cluster whose node is this machine, any folder is shared. Otherwise the file system type
    decides: network and cluster file systems are presumed shared; a local disk is a warning.
    """
    nodes = cluster_nodes() if nodes is None else nodes
    here = {socket.gethostname().split(".")[0], socket.getfqdn().split(".")[0]}
    point, fstype = _mount_of(run_dir)
    if nodes is not None and len(nodes) == 1 and nodes[0].split(".")[0] in here:
        return (f"run folder storage: the cluster's only node is this machine ({nodes[0]}); "
                f"{run_dir} ({fstype}) is seen by the job"), False
    if fstype in SHARED_FS:
        return f"run folder storage: {run_dir} is on {fstype} ({point}), shared with the compute nodes", False
    return (f"run folder storage: {run_dir} is on {fstype} ({point}), a local disk of this machine: the "
            "compute nodes may not see it; use a folder on the cluster's shared storage (--project)"), True


# ----------------------------------------------------------------------------------------- commands
def _checked(argv: list[str], what: str, timeout: float = QUERY_TIMEOUT_S) -> str:
    """stdout of a SLURM command; UserError with its own message when it fails."""
    if shutil.which(argv[0]) is None:
        raise UserError(f"{argv[0]} not found: is this a SLURM login node? (install slurm-wlm or load its module)")
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise UserError(f"{what}: `{shlex.join(argv)}` did not answer in {timeout:g} s; is slurmctld up?") from None
    except OSError as exc:
        raise UserError(f"{what}: cannot run {argv[0]}: {exc.strerror}") from exc
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise UserError(f"{what}: {argv[0]} failed: {detail[-1] if detail else f'exit code {done.returncode}'}")
    return done.stdout


def require_sbatch() -> None:
    """UserError unless sbatch is on PATH (checked before a SLURM launch changes anything)."""
    if shutil.which("sbatch") is None:
        raise UserError("--slurm: sbatch not found on PATH: run this on the cluster's login node (or load its "
                        "SLURM module); without --slurm the run starts on this machine")


def write_script(run_dir: Path, opts: SlurmOptions, name: str, pythonpath: str | None = None) -> Path:
    """Write RUN/slurm.sh (atomically, executable); returns its path. `pythonpath`: the folder holding the
    yolotui package the job must run (the launcher's own)."""
    from yolotui.runs.atomic import atomic_write_text

    path = Path(run_dir) / SCRIPT
    atomic_write_text(path, script_text(run_dir, opts, name, pythonpath=pythonpath))
    os.chmod(path, 0o755)
    return path


def submit(run_dir: Path) -> tuple[str, list[str]]:
    """`sbatch --parsable RUN/slurm.sh` from the run folder; (job id, the command). UserError when refused."""
    argv = ["sbatch", "--parsable", str(Path(run_dir) / SCRIPT)]
    out = _checked(argv, "submitting the job", timeout=60.0)
    job_id = out.strip().splitlines()[-1].split(";")[0].strip() if out.strip() else ""
    if not re.fullmatch(r"\d+(_\d+)?", job_id):
        raise UserError(f"sbatch answered {out.strip()!r}, not a job id; see {Path(run_dir) / SLURM_LOG}")
    _CACHE.clear()
    return job_id, argv


def scancel(job_id: str, signal_name: str | None = None, batch: bool = False) -> None:
    """scancel the job (with `signal_name`: only signal it; `batch`: the batch shell, i.e. the supervisor)."""
    argv = ["scancel"]
    if signal_name:
        argv.append(f"--signal={signal_name}")
    if batch:
        argv.append("--batch")
    argv.append(str(job_id))
    _checked(argv, f"signalling job {job_id}")
    _CACHE.clear()


def requeue(job_id: str) -> None:
    """`scontrol requeue JOB`: SLURM ends the job now and queues it again (same id, same script)."""
    _checked(["scontrol", "requeue", str(job_id)], f"requeueing job {job_id}", timeout=30.0)
    _CACHE.clear()


