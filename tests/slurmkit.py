"""A real one-node SLURM for the tests: brought up by .ci/slurm-up, or found up.

`bring_up()` (what a test module's session fixture calls) skips only where SLURM cannot be started here:
not root, or the packages slurm-wlm/munge are missing (tests/syspkg.py: with the install command; under CI=true
that fails instead). CI runs as root and installs them (.ci/run); a failing bring-up with root and the packages
is an error, not a skip.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from syspkg import require

REPO_ROOT = Path(__file__).resolve().parent.parent
SLURM_UP = REPO_ROOT / ".ci" / "slurm-up"


def bring_up() -> str:
    """The name of the one SLURM node (this host), with munged, slurmctld and slurmd running."""
    require("slurm", root=True, why="a local SLURM")
    done = subprocess.run([str(SLURM_UP)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f".ci/slurm-up failed:\n{done.stdout}\n{done.stderr}"
    return subprocess.run(["hostname", "-s"], capture_output=True, text=True, check=True).stdout.strip()


def wait_for(condition: Callable[[], object], timeout: float, what: str, every: float = 0.5) -> object:
    """Poll `condition` until it returns something truthy; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)


def squeue_state(job_id: str) -> tuple[str, str]:
    """(state, reason) of a job straight from squeue, ('', '') once SLURM has forgotten it."""
    out = subprocess.run(["squeue", "-h", "-t", "all", "-j", str(job_id), "-o", "%T|%r"], capture_output=True,
                         text=True, timeout=20).stdout.strip()
    if "|" not in out:
        return "", ""
    state, reason = out.splitlines()[0].split("|", 1)
    return state, reason


def node_idle() -> bool:
    """True when this one-node cluster's node is idle: the last job's processes and epilog are done."""
    out = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20).stdout.split()
    return bool(out) and all(state.rstrip("*~#") == "idle" for state in out)


def release_requeued(job_id: str, pending_since: float, *settings: str) -> None:
    """Start a requeued (pending) job now instead of after SLURM's ~2-minute BeginTime hold, with `settings`
    (`TimeLimit=10` ...).

    Not at once: slurmd revokes the credential of the job's previous life with one-second granularity, and a new
    life launched on the same node within that second is killed ("Job credential revoked", seen under load). So
    wait until the node is idle and the second of the requeue (at or before `pending_since`, a time.time()) has
    passed.
    """
    wait_for(lambda: node_idle() and time.time() - pending_since > 1.5, 60, "the node to finish the job's last life")
    subprocess.run(["scontrol", "update", f"JobId={job_id}", *settings, "StartTime=now"], check=True, timeout=20)


def cancel_quietly(job_id: str | None) -> None:
    """Leave no job of a failed test behind."""
    if job_id:
        subprocess.run(["scancel", str(job_id)], capture_output=True, timeout=20)
