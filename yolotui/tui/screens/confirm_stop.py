"""Stop with confirmation: a graceful stop (checkpoint, then exit), and a forced one offered after the grace period.

Enter (or y) runs `yolotui stop RUN --grace S --no-wait`, which asks the supervisor to stop the trainer
(SIGTERM: it writes a checkpoint at the next step and exits; SIGKILL after S seconds). The screen then
follows the run's state; if it is still live when the grace period is over, `f` runs
`yolotui stop RUN --force --no-wait`. Esc (or n) closes without stopping anything.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from yolotui.tui.actions import CliResult, Launcher, display_path, format_command, run_cli, stop_args

DEFAULT_GRACE_S = 30.0
POLL_S = 0.5


def read_state(run_dir: Path) -> str:
    """The run's effective state (a dead supervisor reads as interrupted)."""
    from yolotui.runs.status import effective_state

    return effective_state(Path(run_dir))


class ConfirmStopScreen(ModalScreen[str | None]):
    """Confirm, stop gracefully, follow the stop, offer force after the grace period."""

    BINDINGS = [
        Binding("enter,y", "confirm", "Stop"),
        Binding("f", "force", "Force stop"),
        Binding("escape,n", "cancel", "Close"),
    ]
    DEFAULT_CSS = """
    ConfirmStopScreen { align: center middle; }
    ConfirmStopScreen > #stop {
        width: 76; max-width: 100%; height: auto; max-height: 100%;
        border: round $error; background: $surface; padding: 0 1;
    }
    ConfirmStopScreen #command { color: $accent; margin-top: 1; }
    ConfirmStopScreen #status { margin-top: 1; }
    ConfirmStopScreen #status.-error { color: $error; }
    """

    def __init__(self, run_dir: Path, launcher: Launcher | None = None, *, grace_s: float = DEFAULT_GRACE_S,
                 poll_s: float = POLL_S, state_reader: Callable[[Path], str] = read_state,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.run_dir = Path(run_dir)
        self.launcher: Launcher = launcher or run_cli
        self.grace_s = grace_s
        self.poll_s = poll_s
        self.state_reader = state_reader
        self.clock = clock
        self.phase = "confirm"  # confirm -> stopping -> (force offered) -> done
        self.requested_at: float | None = None
        self.force_offered = False
        self.forced = False
        self.launched: list[list[str]] = []
        self.initial_state: str | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="stop"):
            yield Static("", id="question")
            yield Static("", id="command")
            yield Static("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        from yolotui.runs.layout import LIVE_STATES

        self.query_one("#stop").border_title = f"stop {self.run_dir.name}"
        self.initial_state = self.state_reader(self.run_dir)
        if self.initial_state not in LIVE_STATES:
            self.phase = "done"
            self.query_one("#question", Static).update(
                f"Run {self.run_dir.name} is not running ({self.initial_state}): nothing to stop.")
            self.refresh_bindings()
            return
        from yolotui.jobs.control import cannot_note

        note = cannot_note(self.run_dir, "mid_epoch_stop")
        what = (f"Note: {note}." if note else
                f"The trainer writes a checkpoint at the next step, then exits (killed after {self.grace_s:g} s "
                "if it has not).")
        self.query_one("#question", Static).update(
            f"Stop run [b]{self.run_dir.name}[/b]? {what} Resume it later with `yolotui resume`.")
        self._show_command(self.graceful_args())

    def graceful_args(self) -> list[str]:
        """`yolotui stop RUN --grace S --no-wait`."""
        return stop_args(display_path(self.run_dir), grace_s=self.grace_s)

    def force_args(self) -> list[str]:
        """`yolotui stop RUN --force --no-wait`."""
        return stop_args(display_path(self.run_dir), force=True)

    def _show_command(self, args: list[str]) -> None:
        self.query_one("#command", Static).update(f"runs: {format_command(args)}")

    def _status(self, text: str, error: bool = False) -> None:
        status = self.query_one("#status", Static)
        status.update(text)
        status.set_class(error, "-error")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "confirm":
            return self.phase == "confirm"
        if action == "force":
            return self.force_offered and self.phase == "stopping"
        return True

    # -- actions ------------------------------------------------------------------------------------------
    def action_cancel(self) -> None:
        """Close; a stop already requested goes on in the supervisor."""
        self.dismiss(None if self.phase == "confirm" else self.state_reader(self.run_dir))

    def action_confirm(self) -> None:
        """Request the graceful stop."""
        if self.phase != "confirm":
            return
        self.phase = "stopping"
        self.refresh_bindings()
        self._run(self.graceful_args())

    def action_force(self) -> None:
        """Kill the trainer now (offered once the grace period is over)."""
        if not self.force_offered:
            return
        self.force_offered = False
        self.forced = True
        self.refresh_bindings()
        self._run(self.force_args())

    def _run(self, args: list[str]) -> None:
        self.launched.append(list(args))
        self._show_command(args)
        self._status("requesting the stop…")
        self.run_worker(lambda: self._call(args), thread=True, exit_on_error=False, group="stop")

    def _call(self, args: list[str]) -> None:
        try:
            result = self.launcher(list(args))
        except Exception as exc:
            result = CliResult(list(args), 1, "", f"{type(exc).__name__}: {exc}")
        self.app.call_from_thread(self._requested, result)

    def _requested(self, result: CliResult) -> None:
        if not result.ok:
            self._status(f"failed: {result.message}", error=True)
            self.phase = "confirm"
            self.refresh_bindings()
            return
        self._status(result.message)
        if self.requested_at is None:  # the first request starts the one polling loop
            self.requested_at = self.clock()
            self.set_timer(self.poll_s, self.poll)

    def poll(self) -> None:
        """Follow the run until it is no longer live; offer force once the grace period has passed."""
        from yolotui.runs.layout import LIVE_STATES

        if self.phase == "done":
            return
        state = self.state_reader(self.run_dir)
        if state not in LIVE_STATES:
            self.phase = "done"
            self.refresh_bindings()
            self.notify(f"run {self.run_dir.name} {state}", timeout=4)
            self.dismiss(state)
            return
        waited = self.clock() - (self.requested_at or self.clock())
        if waited >= self.grace_s and not self.force_offered and self.phase == "stopping":
            self.force_offered = True
            self.refresh_bindings()
            self._show_command(self.force_args())
            self._status(f"still {state} after {waited:.0f} s: press f to force it (SIGKILL, no checkpoint)",
                         error=True)
        elif self.forced:
            self._status(f"{state}: killed, waiting for the run to end")
        elif not self.force_offered:
            self._status(f"{state}: waiting for the checkpoint ({waited:.0f}/{self.grace_s:g} s)")
        self.set_timer(self.poll_s, self.poll)
