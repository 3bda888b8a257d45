"""The trainer as the supervisor's child: its own session and process group, train.log as its output, death
with the supervisor (PR_SET_PDEATHSIG), reaping as child subreaper, and clearing what it leaves behind.

A mixin of yolotui.supervisor.process.Supervisor (it uses its run folder, config, lock descriptor and notifier).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from yolotui import procs
from yolotui.logconfig import log
from yolotui.runs.atomic import open_append
from yolotui.runs.layout import TRAIN_LOG
from yolotui.runs.logcap import cap_run_logs, previous_path

POLL_S = 0.1
WATCH_INTERVAL_S = 0.5  # how often the stall watchdog looks
LOG_CAP_INTERVAL_S = 10.0  # how often train.log and supervisor.log are held to their caps (yolotui.runs.logcap)
LEFTOVER_GRACE_S = 5.0  # how long processes left in the group after the trainer exits get before SIGKILL

_PR_SET_PDEATHSIG = 1


def load_libc() -> Any | None:
    """The C library (for prctl), or None where it cannot be loaded."""
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


class TrainerChildren:
    """Starting, waiting for and reaping the trainer's process group (see the module docstring)."""

    def reap(self) -> None:
        """Collect every exited child (the trainer, and orphans handed to us as subreaper)."""
        while True:
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.trainer is not None and pid == self.trainer.pid:
                self.trainer_wait_status = wait_status
                self.trainer.returncode = os.waitstatus_to_exitcode(wait_status)
            elif self.notifier.reaped(pid, wait_status):
                self.status.notifications = dict(self.notifier.counts)
            elif self.spot_reaped(pid, wait_status):  # a mirror copy or the preemption watcher
                pass
            elif getattr(self, "gpu", None) is not None:
                self.gpu.reaped(pid, wait_status)  # the GPU watcher

    def child_setup(self) -> None:
        """Runs in the forked child before exec: default SIGHUP, die with the supervisor (Linux)."""
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        if self.libc is not None:
            self.libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != self.pid:  # the supervisor died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    def spawn(self, argv: list[str], env: dict[str, str]) -> None:
        """Start the trainer in its own session/process group, stdout and stderr appended to train.log."""
        cwd = self.config.get("cwd") or str(self.run_dir)
        log_fd = open_append(self.run_dir / TRAIN_LOG, private=True)  # 0600, never through a symlink
        try:
            self.trainer = subprocess.Popen(  # an argv list from run.yaml, never a shell
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=env,
                close_fds=True,
                pass_fds=(self.lock_fd,) if self.lock_fd is not None else (),  # the trainer keeps the run owned
                start_new_session=True,
                preexec_fn=self.child_setup,  # safe: the supervisor is single-threaded
            )
        finally:
            os.close(log_fd)
        self.trainer_pgid = self.trainer.pid
        self.trainer_wait_status = None

    def tick(self) -> None:
        """Called on every poll while the trainer runs; subclasses act on their own requests here."""

    def wait_for_trainer(self) -> None:
        """Poll until the trainer exits, acting on stop requests as they come, watching for stalls."""
        next_watch = next_cap = 0.0
        while self.trainer_wait_status is None:
            self.note_stray_signals()
            self.tick()
            if self.stop_wanted() is not None:
                self.advance_stop()
            self.reap()
            if self.trainer_wait_status is None and time.monotonic() >= next_watch:
                next_watch = time.monotonic() + WATCH_INTERVAL_S
                self.watch_step()
            if time.monotonic() >= next_cap:
                next_cap = time.monotonic() + LOG_CAP_INTERVAL_S
                for name in cap_run_logs(self.run_dir):
                    log(f"{name} passed its cap: its head and last lines kept in {previous_path(Path(name)).name}")
            if self.trainer_wait_status is None:
                time.sleep(POLL_S)

    def clear_group(self) -> None:
        """Signal what is left of the trainer's process group after the trainer exited, and reap it."""
        pgid = self.trainer_pgid
        if pgid is None or not procs.group_members(pgid):
            return
        log(f"processes left in group {pgid} after the trainer exited: sending SIGTERM")
        procs.signal_group(pgid, signal.SIGTERM)
        if self.stop is None:
            grace = LEFTOVER_GRACE_S
        else:
            grace = 0.0 if self.stop["force"] else min(LEFTOVER_GRACE_S, self.stop["grace_s"])
        deadline = time.time() + grace
        while procs.group_members(pgid) and time.time() < deadline:
            self.reap()
            time.sleep(POLL_S)
        if procs.group_members(pgid):
            log(f"sending SIGKILL to what is left of group {pgid}")
            procs.signal_group(pgid, signal.SIGKILL)
            deadline = time.time() + 5.0
            while procs.group_members(pgid) and time.time() < deadline:
                self.reap()
                time.sleep(POLL_S / 2)
        self.reap()
