"""Spot machines in the supervisor: preemption (a SIGTERM from outside, the metadata notice) and the mirror.

- A SIGTERM to the supervisor that is not a `yolotui stop` (a shutdown, `docker stop` passed on, a cloud agent)
  and a notice seen by the `--preempt-url` watcher (yolotui.placement.preempt) are a *preemption*: the stop
  under way says so (`preempted` in status.json's `stop`), the trainer checkpoints at its next step as on any
  graceful stop, and the run ends `interrupted` with class `preempted` (not `killed`, not `stopped`), which
  `yolotui resume --interrupted` picks up first. A SLURM job's supervisor leaves SIGTERM to its own rules
  (yolotui/supervisor/slurm_job.py: `sigterm_is_preemption = False`).
- The mirror (run.yaml's or settings.yaml's `mirror`, yolotui.mirror.settings): a yolotui.mirror.driver.MirrorDriver
  that the supervisor steps on every look at the trainer, whose children it reaps, and whose last copy it makes
  when the run ends, whatever the end (finished, stopped, failed, preempted), before it lets go of the lock.
  Its record is status.json's `mirror`.

A mixin of yolotui.supervisor.process.Supervisor (it uses its run folder, config, status, notifier and save()).
"""

from __future__ import annotations

import time
from typing import Any

from yolotui.errors import UserError
from yolotui.logconfig import log


class SpotHandling:
    """Preemption and mirroring for the supervisor (see the module docstring)."""

    sigterm_is_preemption = True
    mirror: Any = None
    notice_watch: Any = None

    def spot_begin(self, settings: dict[str, Any]) -> None:
        """Set up the mirror and the notice watcher of this life of the run (from run.yaml, then settings.yaml)."""
        self.mirror, self.notice_watch = None, None
        self.status.mirror = None
        self._begin_mirror(settings)
        self._begin_notice_watch(settings)

    def _begin_mirror(self, settings: dict[str, Any]) -> None:
        from yolotui.mirror.driver import FAILING, MirrorDriver
        from yolotui.mirror.settings import resolve
        from yolotui.mirror.target import check_usable, parse_target

        try:
            chosen = resolve(self.config.get("mirror"), settings.get("mirror"))
            if chosen is None:
                return
            check_usable(parse_target(chosen.target, base=self.run_dir))
        except UserError as exc:
            log(f"warning: the mirror is off for this run: {exc}")
            self.status.mirror = {"target": None, "state": FAILING, "last_error": str(exc), "failures": 1,
                                  "last_error_at": time.time()}
            return
        self.mirror = MirrorDriver(self.run_dir, chosen, log=log, notify=self._mirror_notice)
        self.status.mirror = self.mirror.record
        log(f"mirror: copies go to {chosen.target} after every checkpoint and at the end")

    def _begin_notice_watch(self, settings: dict[str, Any]) -> None:
        from yolotui.placement.preempt import DEFAULT_EVERY_S, NoticeWatch, check_url

        parts = [settings.get("preempt"), self.config.get("preempt")]  # run.yaml's keys win
        entry: dict[str, Any] = {}
        for part in parts:
            entry.update({"url": part} if isinstance(part, str) else part if isinstance(part, dict) else {})
        if not entry.get("url"):
            return
        try:
            url = check_url(str(entry["url"]))
            every = float(entry.get("every_s") or DEFAULT_EVERY_S)
            watch = NoticeWatch(self.run_dir, url, every)
            watch.start()
        except (UserError, OSError, ValueError, TypeError) as exc:
            log(f"warning: not watching for a preemption notice: {getattr(exc, 'strerror', None) or exc}")
            return
        self.notice_watch = watch
        log(f"watching {url} for a preemption notice every {every:g} s")

    def _mirror_notice(self, text: str) -> None:
        from yolotui.notify import notifier

        self.notifier.send(notifier.make_event("mirror", self.status.name, self.run_dir, text,
                                               attempt=self.status.attempt))

    def spot_step(self) -> None:
        """One look at the mirror (a new checkpoint starts a copy); status.json is rewritten when it changed."""
        if self.mirror is not None and self.mirror.step():
            self.status.mirror = self.mirror.record
            self.save()

    def spot_reaped(self, pid: int, wait_status: int) -> bool:
        """Claim the end of a mirror copy or of the notice watcher; True when `pid` was one of them."""
        if self.mirror is not None and self.mirror.reaped(pid, wait_status):
            self.status.mirror = self.mirror.record
            self.save()
            return True
        return self.notice_watch is not None and self.notice_watch.reaped(pid, wait_status)

    def preempt_notice(self) -> dict[str, Any] | None:
        """The preemption notice, once the watcher saw one."""
        return self.notice_watch.notice() if self.notice_watch is not None else None

    def preemption_of(self, signum: int | None) -> str | None:
        """Why a stop is a preemption (a SIGTERM to the supervisor), or None (SIGINT, or a SLURM job's SIGTERM)."""
        import signal

        if signum == signal.SIGTERM and self.sigterm_is_preemption:
            return "SIGTERM to the supervisor from outside yolotui (a shutdown, docker stop, the cloud)"
        return None

    def spot_finish(self) -> None:
        """The run ended: stop watching for notices, make the mirror's last copy (bounded by its flush_s)."""
        if self.notice_watch is not None:
            self.notice_watch.close()
        if self.mirror is None:
            return
        try:
            log(f"mirror: the last copy to {self.mirror.settings.target}")
            self.mirror.flush()
        except Exception as exc:  # the mirror must never cost the run its final record
            log(f"warning: the mirror's last copy failed: {type(exc).__name__}: {exc}")
        self.status.mirror = self.mirror.record
        record = self.mirror.record
        log(f"mirror: {record['state']}" + (f" ({record['last_error']})" if record.get("state") == "failing" else ""))
