"""How the supervisor stops a run: stop.request and signals to itself, the grace, SIGTERM then SIGKILL.

`yolotui stop` (yolotui.supervisor.control) writes RUN/stop.request; the supervisor sees it within a poll, records
the state `stopping`, sends SIGTERM to the trainer's process group (SIGKILL at once when forced, or when a later
request forces it), and SIGKILL after the grace, which never cuts a checkpoint being written
(yolotui.supervisor.grace). SIGTERM/SIGINT to the supervisor itself are a graceful stop (a SIGTERM from outside, or
a preemption notice, is a preemption: yolotui/supervisor/spot.py); stray signals are logged and ignored. A mixin
of yolotui.supervisor.process.Supervisor (it uses its status, trainer group and save()).
"""

from __future__ import annotations

import signal
import time
from typing import Any

from yolotui import procs
from yolotui.logconfig import log
from yolotui.runs.layout import STOP_REQUEST, STOPPING
from yolotui.runs.stoprequest import read_stop_request
from yolotui.supervisor import policy
from yolotui.supervisor.grace import checkpoint_being_written, effective_grace

DEFAULT_GRACE_S = 30.0
WRITE_SETTLE_S = 5.0  # after a checkpoint write seen during a stop, the trainer gets this long to exit

# Signals that would end the supervisor by default but mean nothing to it: logged and ignored.
STRAY_SIGNALS = tuple(getattr(signal, name) for name in (
    "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM", "SIGPROF", "SIGPIPE", "SIGIO", "SIGPWR", "SIGXCPU", "SIGXFSZ",
    "SIGSTKFLT") if hasattr(signal, name))

_PR_SET_CHILD_SUBREAPER = 36


class StopHandling:
    """Stop requests and signals, for the supervisor (see the module docstring)."""

    def install_signal_handlers(self) -> None:
        """Ignore hangups; turn SIGTERM/SIGINT to the supervisor into a stop request."""
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

        def on_stop_signal(signum, _frame):
            self.outside_stop = signum

        signal.signal(signal.SIGTERM, on_stop_signal)
        signal.signal(signal.SIGINT, on_stop_signal)

        def on_stray_signal(signum, _frame):
            self.stray_signals.append(signum)  # logged from the poll loop: no I/O inside a handler

        for sig in STRAY_SIGNALS:  # a stray signal never kills the supervisor silently
            signal.signal(sig, on_stray_signal)
        if self.libc is not None:
            # Orphans of the trainer are re-parented to us and reaped, even where PID 1 reaps nothing.
            self.libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

    def note_stray_signals(self) -> None:
        """Log the stray signals received since the last poll (they are ignored)."""
        while self.stray_signals:
            log(f"ignored {policy.signal_name(self.stray_signals.pop(0))} (not a signal the supervisor acts on)")

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
                      "force": False, "grace_s": DEFAULT_GRACE_S, "preempted": self.preemption_of(self.outside_stop)}
        elif (notice := self.preempt_notice()) is not None:  # the --preempt-url watcher saw one (supervisor/spot.py)
            fields = {"requested": time.time(), "by": f"the preemption notice of {notice.get('url')}", "force": False,
                      "grace_s": DEFAULT_GRACE_S, "preempted": f"the machine's preemption notice: {notice.get('notice')}"}
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
