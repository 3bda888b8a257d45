"""The detached supervisor of one run: `python -m yolotui.supervisor.process RUN`.

Started by the launcher in a new session with stdio to RUN/supervisor.log. It

- holds the exclusive flock on RUN/.lock for its whole life (exits at once if another process holds it), so
  "is the lock held" is the run's liveness everywhere;
- ignores SIGHUP; treats SIGTERM/SIGINT sent to itself like `yolotui stop` (the run ends as `stopped`);
- starts the command from run.yaml in its own session and process group, never through a shell, stdin from
  /dev/null, stdout/stderr appended to RUN/train.log with a marker line per attempt, YOLOTUI_RUN_DIR and
  YOLOTUI_ATTEMPT in its environment; the trainer gets SIGTERM if the supervisor dies (Linux), so an
  interrupted run has nothing left running;
- is the child subreaper of everything the trainer starts, so the processes a run leaves behind are reaped,
  and after every attempt signals whatever is left in the trainer's process group (SIGTERM, then SIGKILL);
- with a `queue` section in run.yaml, first waits in state `queued` (lock held) until its conditions hold
  (yolotui.placement.queue), or ends `stopped` on a stop request, or `failed` when they can never hold;
- writes every transition to status.json (queued -> running -> [restarting -> running ...] -> finished /
  failed / stopped, with stopping while a stop is under way), with an `attempts` history, and asks
  `policy.decide` what follows each attempt.

Stopping: `yolotui stop` (control.stop) writes RUN/stop.request; the supervisor sees it within a poll
(0.1 s), records the state `stopping`, sends SIGTERM to the trainer's process group (SIGKILL at once when
forced), SIGKILL after the grace period, records both times in status.json's `stop`, and ends as `stopped`.
"""

from __future__ import annotations

import logging
import os
import shlex
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from yolotui import procs
from yolotui.errors import UserError
from yolotui.logconfig import log, now_iso
from yolotui.notify import notifier as notifications
from yolotui.runs import lock
from yolotui.runs.atomic import append_bytes
from yolotui.runs.layout import (
    EVENTS_JSONL,
    FAILED,
    INTERRUPTED,
    RUNNING,
    STOP_REQUEST,
    STOPPED,
    STOPPING,
    TRAIN_LOG,
)
from yolotui.runs.lock import LOCK_FD_FLAG
from yolotui.runs.manifest import reconcile_run
from yolotui.runs.runconfig import handles_save_signal, read_run_config, restart_settings
from yolotui.runs.status import RunStatus, attempt_seconds, read_status, write_status_resilient
from yolotui.supervisor import gpu_monitor, policy
from yolotui.supervisor.children import TrainerChildren, load_libc
from yolotui.supervisor.decision import PREEMPTED
from yolotui.supervisor.hostoom import MemoryWatch
from yolotui.supervisor.outcome import AttemptOutcome
from yolotui.supervisor.queued import QueueWait
from yolotui.supervisor.spot import SpotHandling
from yolotui.supervisor.stopping import StopHandling
from yolotui.supervisor.watchdog import StallWatch, WatchdogSettings
from yolotui.usersettings import load_user_settings

FINAL_NOTIFY_WAIT_S = 10.0  # how long the ended run waits for its last notification before releasing the lock
MEMORY_EVERY = 4  # the memory sampler (a /proc scan) looks every 4th time: every 2 s


class Supervisor(StopHandling, TrainerChildren, QueueWait, SpotHandling, AttemptOutcome):
    """Runs the attempts of one run and records them; see the module docstring."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir).resolve()
        self.pid = os.getpid()
        self.libc = load_libc()
        self.status = RunStatus()
        self.config: dict[str, Any] = {}
        self.trainer: subprocess.Popen | None = None
        self.trainer_pgid: int | None = None
        self.trainer_wait_status: int | None = None
        self.outside_stop: int | None = None  # a SIGTERM/SIGINT sent to the supervisor itself
        self.stop: dict[str, Any] | None = None
        self.signals_sent: list[int] = []
        self.lock_fd: int | None = None  # the run's lock: handed to every trainer so it keeps the run owned
        self.stray_signals: list[int] = []
        self.write_seen_at = 0.0  # when a checkpoint write was last seen under way during a stop
        self.stop_mtime_ns: int | None = None  # of the stop.request acted on; a newer one may force the stop
        self.notifier = notifications.Notifier(notifications.Targets(), log=log)
        self.watch: StallWatch | None = None  # the stall watchdog of the current attempt
        self.memory: MemoryWatch | None = None  # host memory of the current attempt, for host-oom
        self.best_seen = 0.0
        self.watchdog = WatchdogSettings()
        self.watch_count = 0
        self.gpu: gpu_monitor.GpuMonitor | None = None  # the current attempt's GPU watcher (supervisor/gpu_monitor.py)
        self.uncounted_attempts = 0  # retries on their class's own budget (comm), not counted against max_attempts
        self.comm_failures: list[float] = []  # end times of the run's comm failures, for that budget

    def save(self) -> None:
        """Write status.json; on a full disk log it and go on (status.write_status_resilient)."""
        problem = write_status_resilient(self.run_dir, self.status)
        if problem:
            log(f"warning: {problem}")

    def watch_step(self) -> None:
        """One look at the attempt's progress and memory; escalates a stall."""
        self.notifier.poll()
        self.spot_step()  # a new checkpoint starts a mirror copy
        self.watch_count += 1
        if self.memory is not None and self.watch_count % MEMORY_EVERY == 0:
            self.memory.sample(self.trainer_pgid)
        if self.watch is None:
            return
        events = self.watch.poll()
        gpu_monitor.step(self, events)  # GPU summary, throttle/ECC notifications
        for event in events:
            fitness = event.get("fitness") if event.get("type") == "epoch" else None
            if isinstance(fitness, (int, float)) and fitness > self.best_seen \
                    and fitness >= float(event.get("best_fitness") or 0.0):  # the trainer's best, not a resume's
                self.best_seen = float(fitness)
                self.notifier.send(notifications.best_event(self.status.name, self.run_dir, event))
        was_fired = self.watch.fired
        sig = self.watch.step(self.trainer.pid if self.trainer is not None else None) if self.stop is None else None
        if self.watch.fired and not was_fired:
            log(f"stall watchdog: {self.watch.message()}; trainer facts: {self.watch.facts}")
            self.notifier.send(notifications.make_event(
                "stall", self.status.name, self.run_dir, self.watch.message(), attempt=self.status.attempt,
                facts=self.watch.facts))
        if sig is not None:
            log(f"stall watchdog: sending {policy.signal_name(sig)}")
            self.send_group(sig)

    # -- train.log markers ----------------------------------------------------------------------------------
    def marker(self, text: str) -> None:
        """Append a marker line to train.log, on a line of its own."""
        path = self.run_dir / TRAIN_LOG
        prefix = ""
        try:
            with open(path, "rb") as handle:
                if handle.seek(0, os.SEEK_END) > 0:
                    handle.seek(-1, os.SEEK_END)
                    prefix = "" if handle.read(1) == b"\n" else "\n"
        except OSError:
            pass
        try:
            append_bytes(path, f"{prefix}===== yolotui: {text} =====\n".encode("utf-8", "replace"), private=True)
        except (OSError, UserError) as exc:  # a full disk or a planted symlink: the marker is lost, the run is not
            log(f"warning: cannot write a marker to {path.name}: {getattr(exc, 'strerror', None) or exc}")

    # -- the attempt loop -----------------------------------------------------------------------------------
    def attempt_env(self, attempt: int, changes: dict[str, Any]) -> dict[str, str]:
        """The trainer's environment: ours, run.yaml's additions and remedies, the run dir and attempt."""
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.update(policy.env_for_attempt(self.config, changes))
        env["YOLOTUI_RUN_DIR"] = str(self.run_dir)
        env["YOLOTUI_ATTEMPT"] = str(attempt)
        if self.lock_fd is not None:
            env["YOLOTUI_LOCK_FD"] = str(self.lock_fd)
        log(f"attempt {attempt}: environment additions {policy.env_for_attempt(self.config, changes)}",
            logging.DEBUG)
        return env

    def finish(self, state: str, message: str, record: dict[str, Any] | None = None,
               failure_class: str | None = None) -> None:
        """Record the final state."""
        self.status.state = state
        self.status.ended = time.time()
        self.status.trainer_pid = None
        self.status.message = message
        self.status.failure_class = failure_class
        if record is not None:
            self.status.exit_code = record.get("exit_code")
            self.status.exit_signal = record.get("exit_signal")
        if self.stop is not None:
            self.status.stop = dict(self.stop)
        try:  # honoured or moot: gone before the status says the run ended (a stop waits for that status)
            (self.run_dir / STOP_REQUEST).unlink()
        except OSError:
            pass
        self.save()
        self.spot_finish()  # the mirror's last copy, with the final status.json
        self.save()
        log(f"run {state}: {message}")
        remedy = str((record or {}).get("remedy") or "")
        self.notifier.send(notifications.final_event(self.status.name, self.run_dir, state, message,
                                                     failure_class, remedy, self.status.attempt,
                                                     self.watch.kept if self.watch is not None else []))
        # the lock is held while waiting: a sender still busy after this goes on alone (not counted)
        self.notifier.drain(min(self.notifier.targets.timeout_s + 5.0, FINAL_NOTIFY_WAIT_S))
        if self.notifier.counts["sent"] or self.notifier.counts["failed"]:
            self.status.notifications = dict(self.notifier.counts)
            self.save()

    def begin(self) -> int:
        """Read run.yaml and reset status.json for a new life of the run; returns the attempt limit."""
        self.config = read_run_config(self.run_dir)
        apply_logging(self.config.get("logging"))
        max_attempts, _, _ = restart_settings(self.config)
        previous = read_status(self.run_dir)
        self.status = previous if previous is not None else RunStatus()
        self.status.name = self.status.name or str(self.config.get("name") or self.run_dir.name)
        self.status.run_dir = str(self.run_dir)
        self.status.command = [str(a) for a in self.config["command"]]
        self.status.backend = str(self.config.get("backend") or "exec")
        self.status.device = self.config.get("device")
        self.status.max_attempts = max_attempts
        self.status.supervisor_pid = self.pid
        self.status.launching = False
        if previous is not None:  # a resume: the run's first start stays, earlier attempts' time is kept
            earlier = attempt_seconds(list(previous.attempts or []), previous.ended or previous.updated)
            self.status.earlier_seconds = (previous.earlier_seconds or 0.0) + (earlier or 0.0)
        self.status.started = (previous.started if previous is not None else None) or time.time()
        self.status.ended = None
        self.status.attempt = 0
        self.status.attempts = []
        self.status.remedies = []
        self.status.stop = None
        self.status.notifications = None
        self.status.queue = None
        self.status.gpu_summary = None
        settings = load_user_settings()
        self.notifier.targets = notifications.targets_for(self.config, settings)
        self.watchdog = WatchdogSettings.from_configs(self.config, settings)
        self.spot_begin(settings)
        self.save()  # the supervisor is in charge from here: the launcher waits for this
        return max_attempts

    def run(self) -> int:
        """Run attempts until the policy says stop; returns the supervisor's exit code."""
        max_attempts = self.begin()
        log(f"supervising {self.run_dir} (pid {self.pid}, up to {max_attempts} attempt(s))")
        if self.notifier.targets:
            log(f"notifications: {len(self.notifier.targets.urls)} URL(s)"
                + (", a command hook" if self.notifier.targets.command else ""))
        self.uncounted_attempts, self.comm_failures = 0, []
        if not self.wait_in_queue():
            return 0
        if self.status.started is None:
            self.status.started = time.time()
            self.status.message = None

        changes: dict[str, Any] = {}
        attempt = self.status.attempt  # 0 for a new life; a requeued SLURM job goes on counting
        while True:
            attempt += 1
            if self.stop_wanted() is not None:
                preempted = self.stop.get("preempted")
                self.finish(INTERRUPTED if preempted else STOPPED,
                            f"{'preempted' if preempted else 'stopped on request'} before attempt {attempt} started",
                            failure_class=PREEMPTED if preempted else None)
                return 0
            record, log_offset, spawn_error = self.run_attempt(attempt, max_attempts, changes)
            decision = self.judge(attempt, record, log_offset, spawn_error, changes)
            if not decision.retry:
                self.finish(decision.state, decision.message, record, decision.failure_class)
                return 0
            changes = policy.merge_changes(changes, decision.changes)
            self.prepare_retry(attempt, record, decision)

    def run_attempt(self, attempt: int, max_attempts: int, changes: dict[str, Any]) \
            -> tuple[dict[str, Any], int, str | None]:
        """Start attempt `attempt` with the remedies' `changes` and wait for it to end; returns its record (exit
        code or signal), where its train.log output starts, and why it could not start (None: it ran)."""
        argv = policy.command_for_attempt(self.config, attempt, changes)
        record: dict[str, Any] = {
            "attempt": attempt, "started": time.time(), "ended": None, "exit_code": None,
            "exit_signal": None, "failure_class": None, "message": None, "remedy": None,
            "changes": {}, "command": argv,
        }
        self.status.attempt = attempt
        self.status.attempts.append(record)
        events_offset = _size(self.run_dir / EVENTS_JSONL)
        self.marker(f"attempt {attempt}/{max_attempts} started {now_iso()}: {_display(argv)}")
        self.signals_sent = []
        log_offset = _size(self.run_dir / TRAIN_LOG)  # this attempt's output starts here
        self.watch = StallWatch(self.watchdog, self.run_dir / EVENTS_JSONL, events_offset, self.run_dir / TRAIN_LOG,
                                log_offset, uses_events=self.status.backend == "yolotui",
                                save_signal=handles_save_signal(self.config))
        self.memory = MemoryWatch()
        spawn_error = None
        try:
            self.spawn(argv, self.attempt_env(attempt, changes))
        except (OSError, UserError) as exc:
            spawn_error = f"{argv[0]}: {getattr(exc, 'strerror', None) or exc}"
            self.trainer_pgid = None
            log(f"cannot start {_display(argv)}: {spawn_error}")
        else:
            self.status.state = STOPPING if self.stop is not None else RUNNING
            self.status.trainer_pid = self.trainer.pid
            self.gpu = gpu_monitor.start(self, attempt, changes)
            self.save()
            log(f"attempt {attempt}: started pid {self.trainer.pid}: {_display(argv)}")
            self.wait_for_trainer()
            wait_status = self.trainer_wait_status
            if os.WIFSIGNALED(wait_status):
                record["exit_signal"] = os.WTERMSIG(wait_status)
            else:
                record["exit_code"] = os.waitstatus_to_exitcode(wait_status)
            self.clear_group()
        for note in reconcile_run(self.run_dir):  # a kill between last.pt's and its manifest's rename
            log(note)
        record["ended"] = time.time()
        self.status.trainer_pid = None
        return record, log_offset, spawn_error

    def fail(self, message: str) -> None:
        """Record a failure of the supervisor itself, after ending the trainer's group."""
        if self.trainer_pgid is not None and procs.group_members(self.trainer_pgid):
            self.send_group(signal.SIGKILL)
        self.status.supervisor_pid = self.pid
        self.status.run_dir = self.status.run_dir or str(self.run_dir)
        self.status.name = self.status.name or self.run_dir.name
        self.finish(FAILED, message, failure_class="supervisor")


def _display(argv: list[str]) -> str:
    """The command as one shell-quoted line (newlines shown as \\n) for logs and markers."""
    return shlex.join(argv).replace("\n", "\\n")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def apply_logging(entry: dict[str, Any] | None) -> None:
    """Configure the supervisor's logging from run.yaml's `logging` entry; the defaults when it cannot apply."""
    from yolotui.logconfig import apply

    try:
        apply(entry, "supervisor")
    except (ValueError, TypeError, AttributeError, ImportError, OSError, UserError) as exc:
        apply(None, "supervisor")
        log(f"logging configuration from run.yaml not applied: {exc}", logging.WARNING)


def main(argv: list[str] | None = None, supervisor_class: type[Supervisor] = Supervisor,
         module: str = "yolotui.supervisor.process", lock_wait_s: float = lock.SUPERVISOR_WAIT_S) -> int:
    """Entry point: supervise the run folder given as the only argument (with `supervisor_class`); waits up to
    `lock_wait_s` for RUN/.lock."""
    args = sys.argv[1:] if argv is None else argv
    apply_logging(None)
    inherited: int | None = None
    if len(args) == 3 and args[1] == LOCK_FD_FLAG and args[2].isdigit():
        inherited, args = int(args[2]), args[:1]
    if len(args) != 1:
        print(f"usage: python -m {module} RUN_DIR [{LOCK_FD_FLAG} FD]", file=sys.stderr)
        return 2
    run_dir = Path(args[0]).resolve()
    if not run_dir.is_dir():
        print(f"supervisor: {run_dir} is not a folder", file=sys.stderr)
        return 2
    fd = lock.adopt(run_dir, inherited) if inherited is not None else lock.acquire_within(run_dir, lock_wait_s)
    if fd is None:
        log(f"another process holds {run_dir / '.lock'} ({lock.owner(run_dir) or 'unknown'}); exiting")
        return 3
    lock.write_owner(fd, f"the supervisor of {run_dir.name}")
    supervisor = supervisor_class(run_dir)
    supervisor.lock_fd = fd
    supervisor.install_signal_handlers()
    try:
        return supervisor.run()
    except UserError as exc:
        log(f"error: {exc}")
        supervisor.fail(str(exc))
        return 2
    except BaseException as exc:  # record any crash of the supervisor itself, then exit
        log("supervisor error:\n" + traceback.format_exc())
        supervisor.fail(f"supervisor error: {type(exc).__name__}: {exc}")
        return 1
    finally:
        try:
            (run_dir / STOP_REQUEST).unlink()
        except OSError:
            pass
        os.close(fd)


if __name__ == "__main__":
    raise SystemExit(main())

