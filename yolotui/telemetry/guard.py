"""One guarded way to call NVML: every call runs in a daemon thread and is given up after a time limit.

A driver in trouble can make an NVML call hang for minutes; the TUI and the supervisor must never wait on it.
`TimedCaller.call(func, *args)` returns what `func` returns, raises what it raises, or raises `ReadingSkipped`
when the call took longer than the limit (1 s by default) or was not tried:

- a function whose earlier call is still stuck is not called again until that call returns (so a hung
  driver leaves at most one stuck thread per NVML function, never a growing pile);
- once one call of a sample timed out, the rest of that sample is skipped (`begin_sample` starts a new
  one; `new_budget` gives the next GPU of the sample its own), so a sample costs at most about one limit (per
  GPU) however many readings hang.

The names of the readings skipped in the current sample are in `skipped`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

DEFAULT_LIMIT_S = 1.0


class ReadingSkipped(Exception):
    """A reading was not made: it took over the time limit, or an earlier call of it is still stuck."""


class TimedCaller:
    """Calls functions with a time limit each (see the module docstring)."""

    def __init__(self, limit_s: float = DEFAULT_LIMIT_S) -> None:
        self.limit_s = float(limit_s)
        self.stuck: dict[str, threading.Thread] = {}
        self.skipped: list[str] = []
        self.timeouts = 0  # how many calls ever ran past the limit
        self._sample_timed_out = False

    def begin_sample(self) -> None:
        """Start a new sample: calls are tried again (except those still stuck) and `skipped` is cleared."""
        self._sample_timed_out = False
        self.skipped = []
        self.stuck = {name: thread for name, thread in self.stuck.items() if thread.is_alive()}

    def new_budget(self) -> None:
        """Allow calls again within this sample (e.g. for the next GPU), keeping `skipped` and the stuck calls."""
        self._sample_timed_out = False

    @property
    def slow(self) -> bool:
        """True when a call of the current sample ran past the limit."""
        return self._sample_timed_out

    def call(self, func: Callable[..., Any], *args: Any) -> Any:
        """`func(*args)` within the limit; raises ReadingSkipped when it is over the limit or not tried."""
        name = str(getattr(func, "__name__", None) or type(func).__name__)
        stuck = self.stuck.get(name)
        if self._sample_timed_out or (stuck is not None and stuck.is_alive()):
            self.skipped.append(name)
            raise ReadingSkipped(f"{name} skipped: NVML did not answer within {self.limit_s:g} s")
        outcome: dict[str, Any] = {}

        def target() -> None:
            try:
                outcome["value"] = func(*args)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller below
                outcome["error"] = exc

        thread = threading.Thread(target=target, name=f"nvml-{name}", daemon=True)
        thread.start()
        thread.join(self.limit_s)
        if thread.is_alive():
            self.stuck[name] = thread
            self._sample_timed_out = True
            self.timeouts += 1
            self.skipped.append(name)
            raise ReadingSkipped(f"{name} took over {self.limit_s:g} s: skipped")
        if "error" in outcome:
            raise outcome["error"]
        return outcome.get("value")
