"""A queued run: the supervisor holds the lock in state `queued` until run.yaml's `queue` conditions hold
(yolotui.placement.queue: after another run, when GPUs are free), ends `stopped` on a stop request while it waits,
or `failed` when the conditions can never hold. A mixin of yolotui.supervisor.process.Supervisor.
"""

from __future__ import annotations

import os
import time

from yolotui.logconfig import log
from yolotui.runs.layout import FAILED, QUEUED, STOPPED
from yolotui.supervisor.children import POLL_S

QUEUE_POLL_S = 2.0  # how often a queued run checks its conditions (YOLOTUI_QUEUE_POLL_S overrides)


class QueueWait:
    """Waiting in the queue before the first attempt (see the module docstring)."""

    def wait_in_queue(self) -> bool:
        """Wait in state `queued` until run.yaml's `queue` conditions hold; False when the run ended instead.

        Polls every YOLOTUI_QUEUE_POLL_S seconds (default 2), acting on stop requests within POLL_S. The
        decision to start and the GPU claim are written under the queue's decision lock (yolotui.placement.queue).
        """
        from yolotui.placement import queue
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
