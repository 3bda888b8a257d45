"""The supervisor's own log: the `yolotui.supervisor` logger, whose default handler writes RUN/supervisor.log."""

from __future__ import annotations

import logging
import time

LOG = logging.getLogger("yolotui.supervisor")


def log(message: str, level: int = logging.INFO) -> None:
    """A record of the `yolotui.supervisor` logger: by default a timestamped line on the supervisor's own log
    (its stdout is RUN/supervisor.log); a --log-config adds its handlers (yolotui/supervisor/logconfig.py). Never
    raises: logging's handlers swallow write errors such as a full disk."""
    LOG.log(level, message)


def now_iso(ts: float | None = None) -> str:
    """Local time as `YYYY-mm-dd HH:MM:SS`, for train.log's attempt markers."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts if ts is not None else time.time()))
