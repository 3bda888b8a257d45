"""Restore a mirrored run (command palette: "Restore a run from its mirror"): `yolotui restore SOURCE --project DIR`.

Two fields: the mirrored run, TARGET/RUN_NAME (prefilled with settings.yaml's mirror target), and the project
folder that gets it (runs/train). Enter runs `yolotui restore SOURCE --project DIR --json` in a worker and, when
it succeeds, closes with the restored run's folder (the app opens its dashboard: resume it from there with R);
a refusal (a live run there, a damaged mirror) stays on screen as its one line. Esc closes.
"""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, Static

from yolotui.tui.actions import DEFAULT_PROJECT, CliResult, Launcher, format_command, run_cli


def restore_args(source: str, project: str) -> list[str]:
    """`restore SOURCE --project DIR --json`."""
    return ["restore", source, "--project", project or DEFAULT_PROJECT, "--json"]


def default_source() -> str:
    """settings.yaml's mirror target followed by '/', or '' (never raises: a broken file reads as none)."""
    try:
        from yolotui.mirror.settings import section
        from yolotui.usersettings import load_user_settings

        target = section(load_user_settings(strict=False).get("mirror"), "settings.yaml").get("target")
    except Exception:  # the user's settings must not keep the screen from opening
        return ""
    return f"{str(target).rstrip('/')}/" if target else ""


class RestoreScreen(ModalScreen[Path | None]):
    """Ask for the mirrored run and the project, run `yolotui restore`, close with the restored folder."""

    BINDINGS = [Binding("escape", "cancel", "Close")]
    DEFAULT_CSS = """
    RestoreScreen { align: center middle; }
    RestoreScreen > #restore {
        width: 80; max-width: 100%; height: auto; max-height: 100%;
        border: round $accent; background: $surface; padding: 0 1;
    }
    RestoreScreen #command { color: $accent; margin-top: 1; }
    RestoreScreen #status { margin-top: 1; }
    RestoreScreen #status.-error { color: $error; }
    """

    def __init__(self, launcher: Launcher | None = None, source: str | None = None,
                 project: str = DEFAULT_PROJECT) -> None:
        super().__init__()
        self.launcher: Launcher = launcher or run_cli
        self.initial_source = default_source() if source is None else source
        self.initial_project = project
        self.busy = False

    def compose(self) -> ComposeResult:
        with Vertical(id="restore"):
            yield Static("Bring a mirrored run to this machine (every checkpoint is checked against its manifest):",
                         id="question")
            yield Input(self.initial_source, placeholder="TARGET/RUN_NAME, e.g. s3://bucket/runs/exp", id="source")
            yield Input(self.initial_project, placeholder=DEFAULT_PROJECT, id="project")
            yield Static("", id="command")
            yield Static("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#restore").border_title = "restore from the mirror"
        self._show_command()
        self.query_one("#source", Input).focus()

    def _values(self) -> tuple[str, str]:
        return (self.query_one("#source", Input).value.strip(),
                self.query_one("#project", Input).value.strip() or DEFAULT_PROJECT)

    def _show_command(self) -> None:
        source, project = self._values()
        self.query_one("#command", Static).update(
            f"runs: {format_command(restore_args(source or 'TARGET/RUN_NAME', project)[:-1])}")

    def _status(self, text: str, error: bool = False) -> None:
        status = self.query_one("#status", Static)
        status.update(text)
        status.set_class(error, "-error")

    def on_input_changed(self, _event: Input.Changed) -> None:
        self._show_command()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.input.id == "source" and not self.query_one("#project", Input).value.strip():
            self.query_one("#project", Input).focus()
            return
        self.restore()

    def restore(self) -> None:
        """Run `yolotui restore` in a worker (once at a time)."""
        source, project = self._values()
        if not source or source.endswith("/"):
            self._status("give the mirrored run as TARGET/RUN_NAME", error=True)
            return
        if self.busy:
            return
        self.busy = True
        self._status(f"restoring {source} ...")
        args = restore_args(source, project)

        def call() -> None:
            result = self.launcher(args)
            self.app.call_from_thread(self._done, result)

        self.run_worker(call, thread=True, exit_on_error=False, group="restore")

    def _done(self, result: CliResult) -> None:
        self.busy = False
        run = result.started
        if result.ok and run is not None:
            self.dismiss(Path(run["folder"]))
            return
        self._status(result.message, error=True)

    def action_cancel(self) -> None:
        """Close without restoring."""
        self.dismiss(None)
