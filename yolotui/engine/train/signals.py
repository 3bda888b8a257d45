"""Signal handling in the trainer: requests are flags, acted on at the next step boundary.

SIGTERM / SIGINT: checkpoint at the next step boundary, emit `stop`, exit 0 (the run is stopped, resumable).
SIGUSR1: checkpoint at the next step boundary and go on. SIGHUP: ignored (a closed SSH session is no reason
to stop training).
"""

from __future__ import annotations

import signal
from dataclasses import dataclass


@dataclass
class SignalRequests:
    """What the signals received so far ask for; the training loop reads and clears these."""

    stop: bool = False
    stop_signal: str = ""
    save: bool = False

    def install(self) -> None:
        """Install the handlers (main thread only)."""
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, self._on_stop)
        signal.signal(signal.SIGUSR1, self._on_save)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    def _on_stop(self, signum: int, _frame: object) -> None:
        self.stop = True
        self.stop_signal = signal.Signals(signum).name

    def _on_save(self, _signum: int, _frame: object) -> None:
        self.save = True
