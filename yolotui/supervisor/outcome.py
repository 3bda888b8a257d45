"""What the supervisor makes of an ended attempt: the facts the restart policy reads, its decision and where it is
recorded (the attempt's record, a `remedy` event, train.log's marker), and the preparation of a retry (the remedy's
file changes, status.json, the restart notification, the backoff wait). A mixin of
yolotui.supervisor.process.Supervisor.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

from yolotui.errors import UserError
from yolotui.logconfig import log, now_iso
from yolotui.notify import notifier as notifications
from yolotui.runs.layout import RESTARTING, TRAIN_LOG
from yolotui.supervisor import gpu_monitor, policy, remedies
from yolotui.supervisor.children import POLL_S
from yolotui.supervisor.decision import COMM, Decision


class AttemptOutcome:
    """Judging an ended attempt and preparing the next one (state: the Supervisor's, including
    `uncounted_attempts` and `comm_failures`)."""

    def judge(self, attempt: int, record: dict[str, Any], log_offset: int, spawn_error: str | None,
              changes: dict[str, Any]) -> Decision:
        """The policy's decision on the ended attempt `record`, written into the record, an event and train.log."""
        self.watch.poll()
        attempt_events = [e for e in self.watch.kept if e.get("attempt", attempt) == attempt]
        if self.watch.fired:
            record["stall"] = self.watch.facts
        facts = {**record, "stop_requested": self.stop_wanted() is not None,
                 "preempted": (self.stop or {}).get("preempted"),
                 "hang": self.watch.message() if self.watch.fired else None,
                 "host_oom": self.memory.evidence([self.trainer.pid] if self.trainer else [])
                 if record["exit_signal"] == signal.SIGKILL else None,
                 "uncounted_attempts": self.uncounted_attempts, "comm_failures": list(self.comm_failures),
                 "signals_sent": list(self.signals_sent), "spawn_error": spawn_error,
                 "run_dir": str(self.run_dir), "changes_so_far": changes, "name": self.status.name,
                 "gpu_fault": gpu_monitor.finish(self),
                 "log_tail": _tail_text(self.run_dir / TRAIN_LOG, log_offset)}
        decision = policy.decide(facts, self.config, attempt_events)
        record.update(failure_class=decision.failure_class, message=decision.message,
                      remedy=decision.remedy, changes=decision.changes, settings=decision.settings,
                      retry_at=time.time() + decision.delay_s if decision.retry else None)
        if decision.failure_class is not None:  # every classified failure is also an event
            try:
                remedies.record_remedy_event(self.run_dir, attempt, decision)
            except (OSError, UserError) as exc:  # a full disk or a planted link: the status still says it
                log(f"warning: cannot write the remedy event: {getattr(exc, 'strerror', None) or exc}")
        if decision.failure_class == COMM:
            self.comm_failures = [*self.comm_failures, record["ended"]]
        if decision.retry and not decision.counted:
            self.uncounted_attempts += 1
            record["counted"] = False
        how = policy.describe_exit(record["exit_code"], record["exit_signal"])
        self.marker(f"attempt {attempt} ended {now_iso()}: {how}; {decision.remedy or decision.state}")
        log(f"attempt {attempt} ended: {how} -> {decision.failure_class or decision.state}; {decision.remedy}")
        return decision

    def prepare_retry(self, attempt: int, record: dict[str, Any], decision: Decision) -> None:
        """Apply the remedy's file changes, record the restart, notify, and wait out the backoff (or a stop)."""
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


def _tail_text(path: Path, offset: int, limit: int = 16384) -> str:
    """The last `limit` bytes of `path` written after `offset`, as text (across a cut of the log)."""
    from yolotui.runs.logcap import tail_text

    return tail_text(path, offset, limit)
