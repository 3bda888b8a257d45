"""What every wizard shares: a compact form (label, field, hint, inline error), the live command line it will
run, and launching that exact command in a worker thread.

A wizard subclass composes its fields with `field_row`, returns `{field id: error}` from `validate()` and the
CLI arguments from `command_args()`. Ctrl+S (or the Launch button) validates: any error is shown under its
field and nothing launches; otherwise the launcher (`yolotui.tui.actions.run_cli` unless one is injected)
runs `yolotui ARGS`, and the wizard is dismissed with the run folder the command printed, which the app opens.
"""

from __future__ import annotations

from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Button, Footer, Input, Label, Static

from yolotui.tui.actions import CliResult, Launcher, format_command, launched_run_dir, run_cli


def field_row(label: str, widget: Widget, field_id: str, hint: str = "") -> Vertical:
    """A form field: label and widget on one line, a hint line and an (initially hidden) error line below."""
    return Vertical(
        Horizontal(Label(label, classes="field-label"), widget, classes="field-line"),
        Static(hint, id=f"{field_id}-hint", classes="field-hint" + ("" if hint else " -empty")),
        Static("", id=f"{field_id}-error", classes="field-error"),
        id=f"{field_id}-field", classes="field",
    )


class WizardScreen(ModalScreen[Path | None]):
    """Base of the wizards: fields, inline errors, the command line, launch."""

    TITLE_TEXT = "wizard"
    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "launch", "Launch", priority=True),
    ]
    DEFAULT_CSS = """
    WizardScreen { align: center middle; }
    WizardScreen > #wizard {
        width: 100%; max-width: 110; height: 100%; max-height: 44;
        border: round $primary; background: $surface; padding: 0 1;
    }
    WizardScreen #form { height: 1fr; scrollbar-size-vertical: 1; }
    WizardScreen .field { height: auto; }
    WizardScreen .field-line { height: auto; }
    WizardScreen .field-label { width: 12; color: $text-muted; }
    WizardScreen .field-line Input { width: 1fr; }
    WizardScreen .field-line Input.-invalid { background: $error 25%; }
    WizardScreen .field-line Select { width: 1fr; }
    WizardScreen .field-line RadioSet { width: 1fr; border: none; padding: 0; background: transparent; }
    WizardScreen .field-hint { height: auto; padding-left: 12; color: $text-muted; }
    WizardScreen .field-hint.-empty { display: none; }
    WizardScreen .field-error { height: auto; padding-left: 12; color: $error; display: none; }
    WizardScreen .field-error.-shown { display: block; }
    WizardScreen .hidden { display: none; }
    WizardScreen #command { height: auto; color: $accent; border-top: solid $primary 50%; }
    WizardScreen #status { height: auto; }
    WizardScreen #status.-error { color: $error; }
    WizardScreen #launch { width: auto; min-width: 10; height: 1; border: none; margin-left: 12; }
    """

    def __init__(self, launcher: Launcher | None = None) -> None:
        super().__init__()
        self.launcher: Launcher = launcher or run_cli
        self.errors: dict[str, str] = {}
        self.launching = False
        self.launched: list[list[str]] = []  # every command line this wizard ran (tests, history)
        self.last_result: CliResult | None = None
        self.fix_line_shown = False  # the "N fields to fix" line is up: it follows the errors as they are fixed

    # -- layout -------------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        with Vertical(id="wizard"):
            with VerticalScroll(id="form"):
                yield from self.compose_form()
                yield Button("Launch", id="launch", variant="primary", compact=True)
            yield Static("", id="command")
            yield Static("", id="status")
        yield Footer()

    def compose_form(self) -> ComposeResult:
        """The wizard's fields (subclasses)."""
        yield from ()

    def on_mount(self) -> None:
        self.query_one("#wizard").border_title = self.TITLE_TEXT
        self.refresh_command()

    # -- subclass hooks -----------------------------------------------------------------------------------
    def validate(self) -> dict[str, str]:
        """{field id: error} for every field that is wrong now (subclasses)."""
        return {}

    def command_args(self) -> list[str] | None:
        """The `yolotui` arguments this wizard will run, or None while they cannot be built."""
        return None

    def launch_label(self) -> str:
        """What the command line area says before the command (subclasses may change it)."""
        return "runs:"

    # -- errors and the command line ----------------------------------------------------------------------
    def show_error(self, field_id: str, message: str | None) -> None:
        """Show (or clear) the inline error of one field and mark its input."""
        if message:
            self.errors[field_id] = message
        else:
            self.errors.pop(field_id, None)
        for error in self.query(f"#{field_id}-error").results(Static):
            error.update(message or "")
            error.set_class(bool(message), "-shown")
        for box in self.query(f"#{field_id}-field Input"):
            box.set_class(bool(message), "-invalid")
        if self.fix_line_shown:
            self._show_fix_line()

    def _show_fix_line(self) -> None:
        """'N fields to fix: nothing was launched' while errors remain; cleared once all are fixed."""
        from yolotui.formatting import plural

        if self.errors:
            self.set_status(f"{plural(len(self.errors), 'field')} to fix: nothing was launched", error=True)
        else:
            self.fix_line_shown = False
            self.set_status("")

    def show_hint(self, field_id: str, text: str) -> None:
        """Replace a field's hint line."""
        for hint in self.query(f"#{field_id}-hint").results(Static):
            hint.update(text)
            hint.set_class(not text, "-empty")

    def set_status(self, text: str, error: bool = False) -> None:
        """The line under the command: progress or the reason nothing launched."""
        status = self.query_one("#status", Static)
        status.update(text)
        status.set_class(error, "-error")

    def refresh_command(self) -> None:
        """Show the command line the current fields make."""
        try:
            args = self.command_args()
        except Exception:  # a half-typed field: no command yet
            args = None
        text = format_command(args) if args else "(complete the fields to see the command)"
        self.query_one("#command", Static).update(f"{self.launch_label()} {text}")

    @on(Input.Changed)
    def _input_changed(self, event: Input.Changed) -> None:
        self.field_changed(event.input.id or "")
        self.refresh_command()

    def field_changed(self, widget_id: str) -> None:
        """Called on every edit of an Input: subclasses check that field as it is typed and show its error."""

    @on(Input.Submitted)
    def _input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.focus_next()

    @on(Button.Pressed, "#launch")
    def _launch_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_launch()

    # -- actions ------------------------------------------------------------------------------------------
    def action_cancel(self) -> None:
        """Close without running anything."""
        self.dismiss(None)

    def action_launch(self) -> None:
        """Validate every field; launch the command only when all are right."""
        if self.launching:
            return
        errors = self.validate()
        for field_id in list(self.errors):
            if field_id not in errors:
                self.show_error(field_id, None)
        for field_id, message in errors.items():
            self.show_error(field_id, message)
        self.refresh_command()
        if errors:
            self.fix_line_shown = True
            self._show_fix_line()
            first = next(iter(errors))
            for widget in self.query(f"#{first}-field Input, #{first}-field Select, #{first}-field RadioSet"):
                if widget.display:
                    widget.focus()
                    break
            return
        args = self.command_args()
        if not args:
            self.set_status("nothing to run", error=True)
            return
        self.start_launch(args)

    def start_launch(self, args: list[str]) -> None:
        """Run `yolotui ARGS` in a worker thread."""
        self.launching = True
        self.launched.append(list(args))
        self.set_status(f"running {format_command(args[:2])} …")
        self.run_worker(lambda: self._run(args), thread=True, exit_on_error=False, group="wizard-launch")

    def _run(self, args: list[str]) -> None:
        try:
            result = self.launcher(list(args))
        except Exception as exc:  # an injected or broken launcher: a line, not a traceback
            result = CliResult(list(args), 1, "", f"{type(exc).__name__}: {exc}")
        self.app.call_from_thread(self.launch_done, result)

    def launch_done(self, result: CliResult) -> None:
        """Dismiss with the run folder on success; show the CLI's own error line otherwise."""
        self.launching = False
        self.last_result = result
        if not result.ok:
            self.set_status(f"failed: {result.message}", error=True)
            return
        self.set_status(result.message)
        self.dismiss(self.launched_run(result))

    def launched_run(self, result: CliResult) -> Path | None:
        """The run folder to open after a successful launch."""
        return launched_run_dir(result)
