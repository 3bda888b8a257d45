"""The home screen's hosts: FleetHomeMixin adds every configured host's runs to the runs table (tagged
`HOST:NAME`), a line saying how each host is, and the run keys on a remote row through the remote CLI.

Nothing happens when no host is configured: the home screen is exactly the local one. Every remote call runs
in a thread worker, bounded in time; the UI thread only applies the readings.
- Enter on a remote row: the remote dashboard in this terminal (`ssh -t HOST yolotui attach RUN`, the TUI
  suspended meanwhile); back here when it is closed or the link drops.
- R and F: the run's resume and fine-tune wizards, the same ones, run on the host over `ssh -t` (`yolotui attach
  RUN --wizard resume|finetune` there), so they read its checkpoints where they are.
- x stops (press twice: the first press asks), c asks for a checkpoint, y copies HOST:RUN; the CLI takes
  `--host` for the rest (logs, rm).
"""

from __future__ import annotations

import time
from typing import Any

from textual import work
from textual.message import Message
from textual.widgets import Static

from yolotui.tui.fleet_source import FleetSource, remote_key

TICK_S = 1.0
CONFIRM_S = 4.0


class FleetLoaded(Message):
    """Readings of some hosts (posted from the worker thread)."""

    def __init__(self, readings: list) -> None:
        super().__init__()
        self.readings = readings


class FleetHomeMixin:
    """Mixed into HomeScreen: see the module docstring."""

    fleet: FleetSource | None = None
    _fleet_busy = False
    _fleet_confirm: tuple[str, float] | None = None

    def fleet_start(self: Any, hosts: list | None = None) -> None:
        """Read the configured hosts from now on (no hosts: nothing changes)."""
        source = FleetSource(hosts)
        if not source.hosts:
            return
        self.fleet = source
        line = Static(source.status_line(), id="hosts-line")
        line.styles.height = "auto"
        line.styles.padding = (0, 1)
        self.mount(line, before=self.query_one("#home-body"))
        self.set_interval(TICK_S, self._fleet_tick)
        self._fleet_tick()

    def fleet_summaries(self) -> list:
        """The remote runs to show with the local ones."""
        return self.fleet.summaries() if self.fleet is not None else []

    def _fleet_tick(self: Any) -> None:
        if self.fleet is None:
            return
        self._fleet_line()
        if self._fleet_busy or not self.is_current or not self.fleet.due():
            return
        self._fleet_busy = True
        self._fleet_poll()

    @work(thread=True, exit_on_error=False, group="fleet-poll")
    def _fleet_poll(self: Any) -> None:
        try:
            readings = self.fleet.poll_due()
        except Exception:  # a bug reads as an empty round, the next tick tries again
            readings = []
        self.post_message(FleetLoaded(readings))

    def on_fleet_loaded(self: Any, message: FleetLoaded) -> None:
        """Apply a round of readings and redraw."""
        self._fleet_busy = False
        if self.fleet is None:
            return
        self.fleet.apply(message.readings)
        self._fleet_line()
        self.fleet_rows_changed()

    def _fleet_line(self: Any) -> None:
        for line in self.query("#hosts-line").results(Static):
            line.update(self.fleet.status_line())

    # -- the run keys on a remote row -----------------------------------------------------------------------
    def selected_remote(self: Any) -> tuple[Any, str] | None:
        """(host, run name) of the highlighted row when it is a remote run."""
        found = remote_key(self.selected_path())
        if found is None or self.fleet is None:
            return None
        host = self.fleet.host_of(found[0])
        return (host, found[1]) if host is not None else None

    def open_remote(self: Any, key: str) -> bool:
        """Enter on a remote row: its dashboard over `ssh -t` (True when the row was remote)."""
        found = remote_key(key)
        host = self.fleet.host_of(found[0]) if found and self.fleet else None
        if host is None:
            return False
        self._remote_screen(host, found[1])
        return True

    def _remote_screen(self: Any, host, name: str, wizard: str | None = None) -> None:
        """The run's dashboard (or `wizard`) as the host's yolotui draws it, in this terminal over `ssh -t`; this
        TUI is suspended meanwhile and comes back when it ends."""
        from textual.app import SuspendNotSupported

        from yolotui.fleet.ssh import attach_argv, ssh_argv

        argv = attach_argv(name, wizard=wizard)
        try:
            with self.app.suspend():
                code = self.app.run_in_terminal(ssh_argv(host, argv, tty=True))
        except SuspendNotSupported:
            shown = " ".join(attach_argv(f"{host.name}:{name}", wizard=wizard))  # the same, typed from here
            self.notify(f"run in a terminal: yolotui {shown}", severity="warning")
            return
        if code == 255:
            self.notify(f"{host.name}: the ssh link dropped; the run goes on there", severity="warning")
        elif code != 0:
            self.notify(f"{host.name}: `yolotui {' '.join(argv)}` there ended with status {code} (an older yolotui? "
                        "see `yolotui hosts ls`)", severity="warning", timeout=8)

    def remote_run_action(self: Any, action: str) -> bool:
        """The app's run keys on a remote row (True when handled here, so the local action is skipped)."""
        chosen = self.selected_remote()
        if chosen is None:
            return False
        host, name = chosen
        label = f"{host.name}:{name}"
        if action == "open_stop":
            now = time.monotonic()
            if self._fleet_confirm is None or self._fleet_confirm[0] != label or now - self._fleet_confirm[1] > CONFIRM_S:
                self._fleet_confirm = (label, now)
                self.notify(f"press x again to stop {label} (it writes a checkpoint first)", timeout=CONFIRM_S)
                return True
            self._fleet_confirm = None
            self._fleet_act(host, ["stop", name, "--no-wait"], f"stop {label}")
        elif action in ("open_resume", "open_finetune"):  # the same wizards, run on the host
            self._remote_screen(host, name, "resume" if action == "open_resume" else "finetune")
        elif action == "save_checkpoint":
            self._fleet_act(host, ["save", name], f"checkpoint {label}")
        elif action == "copy_path":
            self.app.copy_to_clipboard(label)
            self.notify(f"copied {label}", timeout=3)
        else:
            verb = {"remove": "rm", "open_log": "logs"}.get(action, "COMMAND")
            self.notify(f"on a run of {host.name}, use the CLI: yolotui {verb} {name} --host {host.name}",
                        severity="warning")
        return True

    @work(thread=True, exit_on_error=False, group="fleet-act")
    def _fleet_act(self: Any, host, argv: list[str], what: str) -> None:
        from yolotui.fleet.ssh import call

        reply = call(host, argv, timeout=60.0)
        if reply.returncode == 0:
            self.app.call_from_thread(self.notify, f"{what}: done", timeout=4)
        else:
            self.app.call_from_thread(self.notify, f"{what}: {reply.reason()}", severity="error", timeout=8)
        if self.fleet is not None:
            self.fleet.reach[host.name].next_try = 0.0  # read that host again at the next tick
