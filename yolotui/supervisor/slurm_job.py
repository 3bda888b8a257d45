"""The supervisor inside a SLURM job: `python -m yolotui.supervisor.slurm_job RUN` (what RUN/slurm.sh `exec`s).

The same supervisor as a local run (yolotui/supervisor/process.py: the lock, attempts, remedies, status.json), in
the foreground of the batch step, plus what SLURM's signals mean (see yolotui/placement/slurm.py):

- SIGUSR1 with RUN/save.request present (`yolotui save`): SIGUSR1 to the trainer, which saves and goes on.
- SIGUSR1 without it (`--signal=B:USR1@N`, the time limit is near): stop the trainer gracefully (checkpoint
  at the next step), record the attempt as `timelimit`, write the state `queued`, then `scontrol requeue`
  the job; the requeued job (SLURM_RESTART_COUNT > 0) keeps the attempt history and resumes from last.pt.
- SIGTERM with RUN/stop.request present (`yolotui stop`): stopped, as locally.
- SIGTERM without it (scancel from outside, preemption, the time limit reached): the trainer checkpoints,
  the run is recorded `interrupted` (class `killed`), resumable; if SLURM requeues the job (preemption with
  requeue), the next life relabels that attempt `preempted` and resumes.

Attempts ended by the time limit or preemption do not count against the restart limit.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

from yolotui import procs
from yolotui.errors import UserError
from yolotui.placement import slurm
from yolotui.runs.layout import EVENTS_JSONL, INTERRUPTED, LAST_PT, QUEUED, STOP_REQUEST, STOPPED, WEIGHTS_DIR
from yolotui.runs.runconfig import handles_save_signal
from yolotui.runs.status import read_status
from yolotui.supervisor import policy
from yolotui.supervisor.decision import KILLED
from yolotui.supervisor.logconfig import log
from yolotui.supervisor.process import Supervisor, _size, main

TIMELIMIT = "timelimit"
PREEMPTED = "preempted"


class SlurmSupervisor(Supervisor):
    """Supervisor of a run inside its SLURM job; see the module docstring."""

    sigterm_is_preemption = False  # SLURM's SIGTERM: class killed, relabelled preempted when the job is requeued

    def __init__(self, run_dir: Path) -> None:
        super().__init__(run_dir)
        self.job_id = os.environ.get("SLURM_JOB_ID", "")
        self.restarts = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
        self.usr1 = False
        self.timelimit = False
        self.timelimit_at = 0.0
        self.events_offset = 0
        self.stop_by_request = False

    def install_signal_handlers(self) -> None:
        """As the supervisor, plus SIGUSR1 (save now, or the time limit is near)."""
        super().install_signal_handlers()

        def on_usr1(_signum, _frame):
            self.usr1 = True

        signal.signal(signal.SIGUSR1, on_usr1)

    def begin(self) -> int:
        """As the supervisor; a requeued job keeps the attempt history and resumes; records the job's facts."""
        previous = read_status(self.run_dir)
        max_attempts = super().begin()
        same_job = previous is not None and (previous.slurm or {}).get("job_id") == self.job_id
        if self.restarts > 0 and same_job:
            self.status.attempts = list(previous.attempts)
            self.status.attempt = int(previous.attempt or len(previous.attempts))
            self.status.remedies = list(previous.remedies)
            last = self.status.attempts[-1] if self.status.attempts else None
            if last is not None and last.get("failure_class") == KILLED and last.get("by_slurm"):
                last["failure_class"] = PREEMPTED
                last["remedy"] = "requeued by SLURM: resumed from the last checkpoint"
            self.config["resume_first"] = True  # an exec command with resume_args gets them at once
        # The restart limit counts the failures of this life of the job; the attempts before the requeue
        # (ended by the time limit or preemption) do not use it up.
        restart = dict(self.config.get("restart") or {})
        restart["max_attempts"] = max_attempts + int(self.status.attempt or 0)
        self.config["restart"] = restart
        self.status.max_attempts = int(restart["max_attempts"])
        self.status.slurm = {"job_id": self.job_id, "restarts": self.restarts,
                             "nodes": os.environ.get("SLURM_JOB_NODELIST", ""),
                             "host": socket.gethostname().split(".")[0], "started": time.time()}
        last_pt = self.run_dir / WEIGHTS_DIR / LAST_PT
        log(f"SLURM job {self.job_id} (restart {self.restarts}) on {self.status.slurm['host']}"
            + (f"; resuming from {last_pt}" if last_pt.exists() else ""))
        return int(restart["max_attempts"])

    def stop_wanted(self) -> dict[str, Any] | None:
        """As the supervisor, remembering whether the stop came from `yolotui stop` (stop.request)."""
        if self.stop is None and (self.run_dir / STOP_REQUEST).exists():
            self.stop_by_request = True
        return super().stop_wanted()

    def tick(self) -> None:
        """Act on a SIGUSR1: a save request, else the time limit."""
        self.timelimit_stop()
        if not self.usr1:
            return
        self.usr1 = False
        request = self.run_dir / slurm.SAVE_REQUEST
        if request.exists():
            try:
                request.unlink()
            except OSError:
                pass
            if handles_save_signal(self.config) and self.trainer_pgid is not None:
                log("save requested (yolotui save): SIGUSR1 to the trainer")
                procs.signal_group(self.trainer_pgid, signal.SIGUSR1)
            return
        if self.stop is not None or self.timelimit:
            return
        self.timelimit = True
        self.timelimit_at = time.monotonic()
        log(f"time limit near: stopping the trainer (checkpoint), then requeueing job {self.job_id}")

    def spawn(self, argv: list[str], env: dict[str, str]) -> None:
        """As the supervisor, remembering where this attempt's events begin."""
        self.events_offset = _size(self.run_dir / EVENTS_JSONL)
        super().spawn(argv, env)

    def trainer_ready(self) -> bool:
        """True once this attempt's trainer has said `start` (its signal handlers are installed by then).

        A SIGTERM before that would kill a yolotui trainer that is still importing torch, without a checkpoint.
        Commands that write no events are taken as ready at once.
        """
        if self.config.get("backend") not in ("yolotui",):
            return True
        try:
            with open(self.run_dir / EVENTS_JSONL, "rb") as handle:
                handle.seek(self.events_offset)
                data = handle.read(4 * 1024 * 1024)
        except OSError:
            return False
        return b'"type":"start"' in data.replace(b" ", b"")

    def timelimit_stop(self) -> None:
        """Once the trainer can checkpoint (or time runs short), stop it like `yolotui stop` would."""
        if not self.timelimit or self.stop is not None:
            return
        lead = int(((self.config.get("slurm") or {}).get("options") or {}).get("signal_lead_s")
                   or slurm.DEFAULT_SIGNAL_LEAD_S)
        waited = time.monotonic() - self.timelimit_at
        if not self.trainer_ready() and waited < max(1.0, lead / 2):
            return
        self.stop = {"requested": time.time(), "by": "SLURM: the job's time limit is near (USR1)", "force": False,
                     "grace_s": float(max(5, lead - waited - 5)), "term_sent": None, "kill_sent": None}

    def finish(self, state: str, message: str, record: dict[str, Any] | None = None,
               failure_class: str | None = None) -> None:
        """As the supervisor; a time-limit stop requeues the job, a SIGTERM from SLURM leaves it resumable."""
        record = record if record is not None else (self.status.attempts[-1] if self.status.attempts else None)
        if self.timelimit and state == STOPPED:
            if record is not None:
                record.update(failure_class=TIMELIMIT, message="checkpointed before the SLURM time limit",
                              remedy="requeued: the job resumes from the last checkpoint")
            super().finish(QUEUED, f"checkpointed before the time limit of job {self.job_id}; requeued, resumes "
                           "from weights/last.pt", record, TIMELIMIT)
            try:
                slurm.requeue(self.job_id)
            except UserError as exc:
                log(f"cannot requeue: {exc}")
                super().finish(INTERRUPTED, f"checkpointed before the time limit, but the requeue failed ({exc}); "
                               f"resume it: yolotui resume {self.status.name} --slurm", record, TIMELIMIT)
            return
        if state == STOPPED and not self.stop_by_request and self.outside_stop is not None:
            if record is not None:
                record.update(failure_class=KILLED, by_slurm=True,
                              message=f"ended by SLURM ({policy.signal_name(self.outside_stop)} to the job)",
                              remedy=f"resumable: yolotui resume {self.status.name}")
            super().finish(INTERRUPTED, f"job {self.job_id} ended by SLURM (scancel, preemption or the time limit) "
                           f"after a checkpoint; resume it: yolotui resume {self.status.name} --slurm",
                           record, KILLED)
            return
        super().finish(state, message, record, failure_class)


if __name__ == "__main__":
    # An earlier job of this run (a resubmission right after a scancel) may still be finishing on this node.
    raise SystemExit(main(supervisor_class=SlurmSupervisor, module="yolotui.supervisor.slurm_job", lock_wait_s=90.0))
