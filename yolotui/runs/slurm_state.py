"""What SLURM says of a run's job: its state (squeue, sacct where accounting exists), cached per process.

Liveness of a SLURM run is its job's state, never RUN/.lock (which may sit on NFS and is held on another
machine), so the one "interrupted" rule (yolotui.runs.status.derived_state) asks here. Every SLURM command
runs with a timeout, and `squeue` answers are cached for a few seconds for all of the user's jobs at once, so
`yolotui ls` over many runs costs one call. Submitting and controlling jobs is yolotui.placement.slurm.
"""

from __future__ import annotations

import getpass
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass
from typing import Any

QUERY_TIMEOUT_S = 10.0
CACHE_S = 2.0

PENDING_STATES = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SUSPENDED"})
ACTIVE_STATES = frozenset({"RUNNING", "CONFIGURING", "COMPLETING", "STAGE_OUT", "SIGNALING", "RESIZING"})


def _run(argv: list[str], timeout: float = QUERY_TIMEOUT_S) -> str | None:
    """stdout of a SLURM command (bounded in time), or None when it is missing, fails or times out."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


@dataclass
class JobInfo:
    """What SLURM says of one job: state (PENDING, RUNNING ...), reason, nodes, time left/limit, restarts."""

    job_id: str
    state: str
    reason: str = ""
    nodes: str = ""
    time_left: str = ""
    time_limit: str = ""
    source: str = "squeue"

    @property
    def pending(self) -> bool:
        """Waiting in the queue (held, requeued, waiting for resources or priority)."""
        return self.state in PENDING_STATES

    @property
    def active(self) -> bool:
        """Allocated and running (or finishing)."""
        return self.state in ACTIVE_STATES

    @property
    def ended(self) -> bool:
        """Completed, failed, cancelled, timed out ... (SLURM will not run it again by itself)."""
        return not (self.pending or self.active)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form."""
        return asdict(self)


_CACHE: dict[str, Any] = {}


def _squeue_all() -> dict[str, JobInfo] | None:
    """All of this user's jobs SLURM still remembers (any state), cached for CACHE_S; None if squeue fails."""
    now = time.monotonic()
    hit = _CACHE.get("squeue")
    if hit is not None and now - hit[0] < CACHE_S:
        return hit[1]
    out = _run(["squeue", "-h", "-t", "all", "-u", getpass.getuser(), "-o", "%i|%T|%r|%N|%L|%l"])
    jobs: dict[str, JobInfo] | None
    if out is None:
        jobs = None
    else:
        jobs = {}
        for line in out.splitlines():
            parts = line.strip().split("|")
            if len(parts) == 6:
                jobs[parts[0]] = JobInfo(parts[0], parts[1], _none(parts[2]), _none(parts[3]), _none(parts[4]),
                                         _none(parts[5]))
    _CACHE["squeue"] = (now, jobs)
    return jobs


def _none(text: str) -> str:
    text = text.strip()
    return "" if text in ("(null)", "None", "N/A", "(None)") else text


def _sacct(job_id: str) -> JobInfo | None:
    """The job's final state from accounting (sacct), when the cluster keeps it; cached like squeue."""
    key = f"sacct:{job_id}"
    now = time.monotonic()
    if _CACHE.get("sacct-broken", (0.0,))[0] > now - 60.0:
        return None
    hit = _CACHE.get(key)
    if hit is not None and now - hit[0] < CACHE_S:
        return hit[1]
    out = _run(["sacct", "-n", "-P", "-X", "-j", str(job_id), "-o", "JobID,State,NodeList,Timelimit"])
    info = None
    if out is None:
        _CACHE["sacct-broken"] = (now,)
    else:
        for line in out.splitlines():
            parts = line.split("|")
            if len(parts) == 4 and parts[0] == str(job_id):
                info = JobInfo(parts[0], parts[1].split()[0] if parts[1] else "UNKNOWN", "", _none(parts[2]), "",
                               _none(parts[3]), source="sacct")
    _CACHE[key] = (now, info)
    return info


def job_info(job_id: str | None, fresh: bool = False, accounting: bool = False) -> JobInfo | None:
    """SLURM's view of `job_id`; None when SLURM cannot be asked or has forgotten the job.

    With `accounting`, a job missing from squeue (ended more than MinJobAge ago) is looked up in sacct where
    the cluster keeps accounting (one call per job, so not for listings: for them a missing job has ended).
    """
    if not job_id:
        return None
    if fresh:
        _CACHE.clear()
    jobs = _squeue_all()
    if jobs is None:
        return None
    info = jobs.get(str(job_id))
    missing: set[str] = _CACHE.setdefault("missing", set())
    if info is None and str(job_id) not in missing:
        # The listing may predate the job (submitted by another process since): look once more. A job missing
        # from a listing taken after its id was known has ended, and is not looked for again.
        _CACHE.pop("squeue", None)
        jobs = _squeue_all()
        if jobs is None:
            return None  # squeue failed this time: that says nothing about the job (derived_state checks reachable)
        info = jobs.get(str(job_id))
        if info is None:
            missing.add(str(job_id))
    if info is None and accounting:
        info = _sacct(str(job_id))
    return info


def reachable() -> bool:
    """True when squeue answers (cached)."""
    return _squeue_all() is not None


# ----------------------------------------------------------------------------------- state of a run
def derived_state(recorded: str | None, job_id: str) -> str:
    """The state to show for a SLURM run: from the job's state, not the lock.

    pending -> queued; running -> the recorded state (queued until the supervisor has written; a final state
    while the job completes); ended or forgotten -> the recorded final state, or interrupted if it was live.
    finished, failed and stopped are shown without asking SLURM; when SLURM cannot be asked the recorded
    state is shown as is.
    """
    from yolotui.runs.layout import FAILED, FINISHED, INTERRUPTED, LIVE_STATES, QUEUED, RUNNING, STOPPED

    if recorded in (FINISHED, FAILED, STOPPED):
        return recorded  # the supervisor's last word; SLURM cannot make such a run live again by itself
    if not reachable():
        return recorded or QUEUED
    info = job_info(job_id)
    if info is None and not reachable():
        return recorded or QUEUED  # a listing that failed is no evidence that the job ended
    if info is not None and info.pending:
        return QUEUED
    if info is not None and info.active:
        return recorded or RUNNING  # a final state written by the supervisor wins while the job completes
    if recorded in LIVE_STATES or recorded is None:
        return INTERRUPTED
    return recorded


def describe(job_id: str, accounting: bool = False) -> dict[str, Any]:
    """The facts ls/status/the TUI/doctor show: job_id, state, reason, nodes, time_left (empty when unknown);
    `accounting` also asks sacct about a job squeue has forgotten (for one run, not for listings)."""
    info = job_info(job_id, accounting=accounting)
    if info is None:
        return {"job_id": job_id, "state": "" if reachable() else "unknown (squeue did not answer)",
                "reason": "", "nodes": "", "time_left": ""}
    return {"job_id": job_id, "state": info.state, "reason": info.reason if info.pending else "",
            "nodes": info.nodes, "time_left": info.time_left if info.active else ""}


def short_text(facts: dict[str, Any]) -> str:
    """'job 12 on node1, 0:42 left' / 'job 12 pending (Priority)' for tables and headers."""
    text = f"job {facts.get('job_id')}"
    if facts.get("reason"):
        text += f" pending ({facts['reason']})"
    elif facts.get("nodes"):
        text += f" on {facts['nodes']}"
    if facts.get("time_left"):
        text += f", {facts['time_left']} left"
    return text
