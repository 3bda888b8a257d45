"""The detached supervisor of one run: `python -m yolotui.runs.supervisor RUN`.

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
  (yolotui.runs.queue), or ends `stopped` on a stop request, or `failed` when they can never hold;
- writes every transition to status.json (queued -> running -> [restarting -> running ...] -> finished /
  failed / stopped, with stopping while a stop is under way), with an `attempts` history, and asks
  `policy.decide` what follows each attempt.

Stopping: `yolotui stop` (control.stop) writes RUN/stop.request; the supervisor sees it within a poll
(0.1 s), records the state `stopping`, sends SIGTERM to the trainer's process group (SIGKILL at once when
forced), SIGKILL after the grace period, records both times in status.json's `stop`, and ends as `stopped`.
"""

from __future__ import annotations

import ctypes
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

from yolotui.errors import UserError
from yolotui.runs import lock, policy, procs, remedies
from yolotui.runs import notify as notifications
from yolotui.runs.grace import checkpoint_being_written, effective_grace
from yolotui.runs.hostoom import MemoryWatch
from yolotui.runs.launcher import LOCK_FD_FLAG
from yolotui.runs.layout import (
    EVENTS_JSONL,
    FAILED,
    QUEUED,
    RESTARTING,
    RUNNING,
    STOP_REQUEST,
    STOPPED,
    STOPPING,
    TRAIN_LOG,
)
from yolotui.runs.manifest import reconcile_run
from yolotui.runs.nofollow import append_bytes, open_append
from yolotui.runs.runconfig import handles_save_signal, read_run_config
from yolotui.runs.status import RunStatus, attempt_seconds, read_status, write_status_resilient
from yolotui.runs.stoprequest import read_stop_request
from yolotui.runs.usersettings import load_user_settings
from yolotui.runs.watchdog import StallWatch, WatchdogSettings

POLL_S = 0.1
WATCH_INTERVAL_S = 0.5  # how often the stall watchdog looks
FINAL_NOTIFY_WAIT_S = 10.0  # how long the ended run waits for its last notification before releasing the lock
MEMORY_EVERY = 4  # the memory sampler (a /proc scan) looks every 4th time: every 2 s
QUEUE_POLL_S = 2.0  # how often a queued run checks its conditions (YOLOTUI_QUEUE_POLL_S overrides)
DEFAULT_GRACE_S = 30.0
WRITE_SETTLE_S = 5.0  # after a checkpoint write seen during a stop, the trainer gets this long to exit
LEFTOVER_GRACE_S = 5.0  # how long processes left in the group after the trainer exits get before SIGKILL
LOCK_TRIES = 20  # readers probe the lock for microseconds; retry briefly before concluding it is taken

# Signals that would end the supervisor by default but mean nothing to it: logged and ignored (issue 14, item 4).
STRAY_SIGNALS = tuple(getattr(signal, name) for name in (
    "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM", "SIGPROF", "SIGPIPE", "SIGIO", "SIGPWR", "SIGXCPU", "SIGXFSZ",
    "SIGSTKFLT") if hasattr(signal, name))

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _libc() -> Any | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _now_iso(ts: float | None = None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts if ts is not None else time.time()))


LOG = logging.getLogger("yolotui.supervisor")


def log(message: str, level: int = logging.INFO) -> None:
    """A record of the `yolotui.supervisor` logger: by default a timestamped line on the supervisor's own log
    (its stdout is RUN/supervisor.log); a --log-config adds its handlers (yolotui/runs/logconfig.py). Never
    raises: logging's handlers swallow write errors such as a full disk (issue 14, item 12)."""
    LOG.log(level, message)


class Supervisor:
    """Runs the attempts of one run and records them; see the module docstring."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir).resolve()
        self.pid = os.getpid()
        self.libc = _libc()
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
        self.watch: StallWatch | None = None  # the stall watchdog of the current attempt (issue 16)
        self.memory: MemoryWatch | None = None  # host memory of the current attempt, for host-oom
        self.best_seen = 0.0
        self.watchdog = WatchdogSettings()
        self.watch_count = 0

    # -- signals and status ---------------------------------------------------------------------------------
    def install_signal_handlers(self) -> None:
        """Ignore hangups; turn SIGTERM/SIGINT to the supervisor into a stop request."""
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

        def on_stop_signal(signum, _frame):
            self.outside_stop = signum

        signal.signal(signal.SIGTERM, on_stop_signal)
        signal.signal(signal.SIGINT, on_stop_signal)

        def on_stray_signal(signum, _frame):
            self.stray_signals.append(signum)  # logged from the poll loop: no I/O inside a handler

        for sig in STRAY_SIGNALS:  # issue 14, item 4: a stray signal never kills the supervisor silently
            signal.signal(sig, on_stray_signal)
        if self.libc is not None:
            # Orphans of the trainer are re-parented to us and reaped, even where PID 1 reaps nothing.
            self.libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

    def save(self) -> None:
        """Write status.json; on a full disk log it and go on (status.write_status_resilient)."""
        problem = write_status_resilient(self.run_dir, self.status)
        if problem:
            log(f"warning: {problem}")

    def note_stray_signals(self) -> None:
        """Log the stray signals received since the last poll (they are ignored)."""
        while self.stray_signals:
            log(f"ignored {policy.signal_name(self.stray_signals.pop(0))} (not a signal the supervisor acts on)")

    # -- stop handling --------------------------------------------------------------------------------------
    def stop_wanted(self) -> dict[str, Any] | None:
        """The pending stop request (from RUN/stop.request or a signal to the supervisor), if any."""
        request = read_stop_request(self.run_dir / STOP_REQUEST)
        if self.stop is not None:
            if request is not None and request.force and not self.stop["force"] \
                    and request.mtime_ns != self.stop_mtime_ns:
                self.stop_mtime_ns = request.mtime_ns
                self.stop["force"] = True  # --force overrides a graceful stop under way, at once
                log(f"stop forced by {request.by}")
            return self.stop
        if request is not None:
            if request.problem:
                log(f"warning: {STOP_REQUEST}: {request.problem}")
            self.stop_mtime_ns = request.mtime_ns
            fields = {"requested": request.requested, "by": request.by, "force": request.force,
                      "grace_s": request.grace_s}
        elif self.outside_stop is not None:
            fields = {"requested": time.time(), "by": f"{policy.signal_name(self.outside_stop)} to the supervisor",
                      "force": False, "grace_s": DEFAULT_GRACE_S}
        else:
            return None
        self.stop = {**fields, "term_sent": None, "kill_sent": None}
        log(f"stop requested by {self.stop['by']} (force={self.stop['force']}, grace {self.stop['grace_s']:g} s)")
        return self.stop

    def advance_stop(self) -> None:
        """Send the stop's signals when due: SIGTERM (SIGKILL if forced) now, SIGKILL after the grace."""
        stop = self.stop
        if stop is None or self.trainer_pgid is None:
            return
        now = time.time()
        changed = False
        if stop["term_sent"] is None and stop["kill_sent"] is None:
            sig = signal.SIGKILL if stop["force"] else signal.SIGTERM
            self.send_group(sig)
            stop["kill_sent" if stop["force"] else "term_sent"] = now
            changed = True
        elif stop["kill_sent"] is None and stop["force"]:
            log("stop forced: sending SIGKILL now")
            self.send_group(signal.SIGKILL)
            stop["kill_sent"] = now
            changed = True
        elif stop["kill_sent"] is None:
            grace, why = effective_grace(stop["grace_s"], self.run_dir, self.status.attempt)
            if grace != stop.get("grace_used_s"):
                stop["grace_used_s"], stop["grace_why"] = grace, why
                changed = True
            writing = checkpoint_being_written(self.run_dir)
            if writing is not None:
                self.write_seen_at = now
            if now - stop["term_sent"] >= grace:
                if writing is not None:
                    if not stop.get("waiting_for"):
                        log(f"grace over but {writing.name} is being written: waiting for it before SIGKILL")
                        stop["waiting_for"] = writing.name
                        changed = True
                elif now - self.write_seen_at >= WRITE_SETTLE_S:  # let it exit after its write
                    log(f"trainer still running {grace:g} s after SIGTERM ({why}): sending SIGKILL")
                    self.send_group(signal.SIGKILL)
                    stop["kill_sent"] = now
                    changed = True
        if changed or self.status.state != STOPPING:
            self.status.state = STOPPING
            self.status.stop = dict(stop)
            self.save()

    def send_group(self, sig: int) -> None:
        """Signal the trainer's process group, remembering that we sent it."""
        if self.trainer_pgid is None:
            return
        self.signals_sent.append(int(sig))
        if procs.signal_group(self.trainer_pgid, sig):
            log(f"sent {policy.signal_name(sig)} to process group {self.trainer_pgid}")

    # -- children -------------------------------------------------------------------------------------------
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
        next_watch = 0.0
        while self.trainer_wait_status is None:
            self.note_stray_signals()
            self.tick()
            if self.stop_wanted() is not None:
                self.advance_stop()
            self.reap()
            if self.trainer_wait_status is None and time.monotonic() >= next_watch:
                next_watch = time.monotonic() + WATCH_INTERVAL_S
                self.watch_step()
            if self.trainer_wait_status is None:
                time.sleep(POLL_S)

    def watch_step(self) -> None:
        """One look at the attempt's progress and memory; escalates a stall (issue 16)."""
        self.notifier.poll()
        self.watch_count += 1
        if self.memory is not None and self.watch_count % MEMORY_EVERY == 0:
            self.memory.sample(self.trainer_pgid)
        if self.watch is None:
            return
        for event in self.watch.poll():
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

    # -- the queue ------------------------------------------------------------------------------------------
    def wait_in_queue(self) -> bool:
        """Wait in state `queued` until run.yaml's `queue` conditions hold; False when the run ended instead.

        Polls every YOLOTUI_QUEUE_POLL_S seconds (default 2), acting on stop requests within POLL_S. The
        decision to start and the GPU claim are written under the queue's decision lock (yolotui.runs.queue).
        """
        from yolotui.runs import queue
        from yolotui.telemetry.gpu import GpuSampler

        spec = self.config.get("queue")
        if not spec:
            return True
        interval = float(os.environ.get("YOLOTUI_QUEUE_POLL_S") or QUEUE_POLL_S)
        created = float(self.config.get("created") or time.time())
        sampler = GpuSampler()
        self.status.state = QUEUED
        self.status.started = None
        self.status.queue = {"spec": spec, "reason": queue.describe(spec), "since": time.time(),
                             "waiting_on": None, "gpus": None, "claimed": None}
        self.save()
        log(f"queued: {queue.describe(spec)}")
        try:
            while True:
                if self.stop_wanted() is not None:
                    self.finish(STOPPED, "stopped while queued; it never started")
                    return False
                with queue.decision_lock():
                    verdict = queue.check(spec, self.run_dir, created, sampler)
                    if verdict.ready:
                        self.status.queue.update(reason=verdict.reason, waiting_on=None, claimed=verdict.gpus,
                                                 started=time.time())
                        self.save()  # the claim is on disk before another queued run decides
                        log(f"queue: starting ({verdict.reason})")
                        return True
                if verdict.impossible:
                    self.finish(FAILED, f"not started: {verdict.reason}", failure_class="queue")
                    return False
                if (verdict.reason, verdict.waiting_on) != (self.status.queue.get("reason"),
                                                            self.status.queue.get("waiting_on")):
                    self.status.queue.update(reason=verdict.reason, waiting_on=verdict.waiting_on, gpus=verdict.gpus)
                    self.status.message = verdict.reason
                    self.save()
                    log(f"queue: {verdict.reason}")
                deadline = time.time() + interval
                while time.time() < deadline and self.stop_wanted() is None:
                    self.note_stray_signals()
                    time.sleep(POLL_S)
        finally:
            sampler.close()

    def begin(self) -> int:
        """Read run.yaml and reset status.json for a new life of the run; returns the attempt limit."""
        self.config = read_run_config(self.run_dir)
        apply_logging(self.config.get("logging"))
        max_attempts, _, _ = policy.restart_settings(self.config)
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
        settings = load_user_settings()
        self.notifier.targets = notifications.targets_for(self.config, settings)
        self.watchdog = WatchdogSettings.from_configs(self.config, settings)
        self.save()  # the supervisor is in charge from here: the launcher waits for this
        return max_attempts

    def run(self) -> int:
        """Run attempts until the policy says stop; returns the supervisor's exit code."""
        max_attempts = self.begin()
        watchdog = self.watchdog
        log(f"supervising {self.run_dir} (pid {self.pid}, up to {max_attempts} attempt(s))")
        if self.notifier.targets:
            log(f"notifications: {len(self.notifier.targets.urls)} URL(s)"
                + (", a command hook" if self.notifier.targets.command else ""))
        uncounted, comm_failures = 0, []
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
                self.finish(STOPPED, f"stopped on request before attempt {attempt} started")
                return 0
            argv = policy.command_for_attempt(self.config, attempt, changes)
            record: dict[str, Any] = {
                "attempt": attempt, "started": time.time(), "ended": None, "exit_code": None,
                "exit_signal": None, "failure_class": None, "message": None, "remedy": None,
                "changes": {}, "command": argv,
            }
            self.status.attempt = attempt
            self.status.attempts.append(record)
            events_offset = _size(self.run_dir / EVENTS_JSONL)
            self.marker(f"attempt {attempt}/{max_attempts} started {_now_iso()}: {_display(argv)}")
            self.signals_sent = []
            log_offset = _size(self.run_dir / TRAIN_LOG)  # this attempt's output starts here
            self.watch = StallWatch(watchdog, self.run_dir / EVENTS_JSONL, events_offset, self.run_dir / TRAIN_LOG,
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
            self.watch.poll()
            attempt_events = [e for e in self.watch.kept if e.get("attempt", attempt) == attempt]
            if self.watch.fired:
                record["stall"] = self.watch.facts
            facts = {**record, "stop_requested": self.stop_wanted() is not None,
                     "hang": self.watch.message() if self.watch.fired else None,
                     "host_oom": self.memory.evidence([self.trainer.pid] if self.trainer else [])
                     if record["exit_signal"] == signal.SIGKILL else None,
                     "uncounted_attempts": uncounted, "comm_failures": list(comm_failures),
                     "signals_sent": list(self.signals_sent), "spawn_error": spawn_error,
                     "run_dir": str(self.run_dir), "changes_so_far": changes, "name": self.status.name,
                     "log_tail": _tail_text(self.run_dir / TRAIN_LOG, log_offset)}
            decision = policy.decide(facts, self.config, attempt_events)
            record.update(failure_class=decision.failure_class, message=decision.message,
                          remedy=decision.remedy, changes=decision.changes, settings=decision.settings,
                          retry_at=time.time() + decision.delay_s if decision.retry else None)
            if decision.failure_class is not None:  # issue 7: every classified failure is also an event
                try:
                    remedies.record_remedy_event(self.run_dir, attempt, decision)
                except (OSError, UserError) as exc:  # a full disk or a planted link: the status still says it
                    log(f"warning: cannot write the remedy event: {getattr(exc, 'strerror', None) or exc}")
            if decision.failure_class == policy.COMM:
                comm_failures.append(record["ended"])
            if decision.retry and not decision.counted:
                uncounted += 1
                record["counted"] = False
            how = policy.describe_exit(record["exit_code"], record["exit_signal"])
            self.marker(f"attempt {attempt} ended {_now_iso()}: {how}; {decision.remedy or decision.state}")
            log(f"attempt {attempt} ended: {how} -> {decision.failure_class or decision.state}; {decision.remedy}")
            if not decision.retry:
                self.finish(decision.state, decision.message, record, decision.failure_class)
                return 0
            changes = policy.merge_changes(changes, decision.changes)
            try:
                applied = remedies.apply_file_changes(self.run_dir, decision.changes)
            except (OSError, UserError) as exc:
                applied = {}
                log(f"could not apply the remedy to the run's files: {exc}")
            if applied:
                log("remedy written to the run's files: " + ", ".join(f"{k} {a} -> {b}" for k, (a, b) in applied.items()))
            self.status.remedies.append({"attempt": attempt + 1, "failure_class": decision.failure_class,
                                         "remedy": decision.remedy, "changes": decision.changes,
                                         "settings": decision.settings})
            self.status.state = RESTARTING
            self.status.message = f"{decision.message}; {decision.remedy}"
            self.status.failure_class = decision.failure_class
            self.status.exit_code = record["exit_code"]
            self.status.exit_signal = record["exit_signal"]
            self.save()
            self.notifier.send(notifications.make_event(
                "restart", self.status.name, self.run_dir,
                notifications.restart_text(decision.failure_class, decision.settings,
                                           remedies.last_checkpoint(self.run_dir), decision.remedy),
                attempt=attempt + 1, failure_class=decision.failure_class, remedy=decision.remedy,
                message=decision.message))
            deadline = time.time() + decision.delay_s
            while time.time() < deadline and self.stop_wanted() is None:
                self.note_stray_signals()
                self.reap()
                self.notifier.poll()
                time.sleep(POLL_S)

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


def _tail_text(path: Path, offset: int, limit: int = 16384) -> str:
    """The last `limit` bytes of `path` written after `offset`, as text."""
    try:
        with open(path, "rb") as handle:
            end = handle.seek(0, os.SEEK_END)
            handle.seek(max(offset, end - limit))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def apply_logging(entry: dict[str, Any] | None) -> None:
    """Configure the supervisor's logging from run.yaml's `logging` entry; the defaults when it cannot apply."""
    from yolotui.runs.logconfig import apply

    try:
        apply(entry, "supervisor")
    except (ValueError, TypeError, AttributeError, ImportError, OSError, UserError) as exc:
        apply(None, "supervisor")
        log(f"logging configuration from run.yaml not applied: {exc}", logging.WARNING)


def acquire_lock(run_dir: Path, wait_s: float = LOCK_TRIES * 0.05) -> int | None:
    """Take RUN/.lock, retrying for `wait_s` past readers' momentary shared probes; None if really held."""
    deadline = time.monotonic() + wait_s
    while True:
        fd = lock.acquire(run_dir)
        if fd is not None:
            return fd
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def adopt_lock(run_dir: Path, fd: int) -> int | None:
    """Take over the lock descriptor the launcher handed down; None unless it really is RUN/.lock, held."""
    import fcntl

    try:
        mine, expected = os.fstat(fd), os.stat(lock.lock_path(run_dir))
        if (mine.st_dev, mine.st_ino) != (expected.st_dev, expected.st_ino):
            return None
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # ours already (same open file): succeeds at once
    except OSError:
        return None
    os.set_inheritable(fd, False)
    return fd


def main(argv: list[str] | None = None, supervisor_class: type[Supervisor] = Supervisor,
         module: str = "yolotui.runs.supervisor", lock_wait_s: float = LOCK_TRIES * 0.05) -> int:
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
    fd = adopt_lock(run_dir, inherited) if inherited is not None else acquire_lock(run_dir, lock_wait_s)
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

