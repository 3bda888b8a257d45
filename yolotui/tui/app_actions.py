"""Run actions of the app: the wizards (new run, resume/extend, fine-tune), stop, checkpoint now, log in
$PAGER, copy the run path, restore a run from its mirror; their keys and command-palette entries.

`RunActionsMixin` is mixed into the Textual app. The keys act on the run of the screen in front: the
dashboard's run, or the highlighted row of the runs table. Every launch goes through `self.launcher`
(`yolotui.tui.actions.run_cli` unless a test injects another), so the TUI only ever runs `yolotui ...`.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

from textual.app import SystemCommand
from textual.binding import Binding
from textual.screen import ModalScreen, Screen

from yolotui.tui.actions import DEFAULT_PROJECT, Launcher, pager_argv, run_cli, save_args

RUN_ACTIONS = ("resume_run", "finetune_run", "stop_run", "save_checkpoint", "open_log", "copy_path")
ALL_ACTIONS = ("new_run", *RUN_ACTIONS)

# On the runs table and the dashboard (screen bindings, so the footer lists them before the app's q ? t).
RUN_ACTION_BINDINGS = [
    Binding("n", "app.new_run", "New"),
    Binding("R", "app.resume_run", "Resume"),
    Binding("F", "app.finetune_run", "Fine-tune", show=False),
    Binding("x", "app.stop_run", "Stop"),
    Binding("c", "app.save_checkpoint", "Checkpoint", show=False),
    Binding("l", "app.open_log", "Log", show=False),
    Binding("y", "app.copy_path", "Copy path", show=False),
]


class RunActionsMixin:
    """Actions, keys and palette entries for the wizards and run controls (mixed into the App)."""

    launcher: Launcher | None = None
    run_diagnose: Callable[[Path], Any] | None = None  # the resume wizard's diagnose_run (tests inject a quick one)
    new_run_project: str = DEFAULT_PROJECT

    # -- which run ----------------------------------------------------------------------------------------
    def run_launcher(self) -> Launcher:
        """The callable that runs `yolotui ARGS` (injected in tests)."""
        return self.launcher or run_cli

    def current_run(self, screen: Screen | None = None) -> Path | None:
        """The run the keys act on: the dashboard's, or the highlighted row of the runs table."""
        screen = screen if screen is not None else self.screen
        run_dir = getattr(screen, "run_dir", None)
        if run_dir is not None and not isinstance(screen, ModalScreen):
            return Path(run_dir)
        selected = getattr(screen, "selected_path", None)
        if callable(selected):
            path = selected()
            return Path(path) if path else None
        return None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ALL_ACTIONS:
            if isinstance(self.screen, ModalScreen):
                return False
            if action in RUN_ACTIONS and self.current_run() is None:
                return False
        return super().check_action(action, parameters)  # type: ignore[misc]

    def on_data_table_row_highlighted(self, event) -> None:
        """A new highlighted run: the footer's run keys follow it (they hide while no run is highlighted)."""
        if self.screen_stack:  # a highlight that arrives while the app closes has no footer left to refresh
            self.refresh_bindings()

    def on_runs_loaded(self, message) -> None:
        """The runs table was (re)filled (HomeScreen's message, bubbled up): the run keys may apply now."""
        self.call_after_refresh(self.refresh_bindings)

    # -- opening screens ----------------------------------------------------------------------------------
    def _opened(self, run_dir: Path | None) -> None:
        if run_dir is not None:
            self.open_run(Path(run_dir))  # type: ignore[attr-defined]
        elif getattr(self, "start_wizard", None):
            self.call_after_refresh(self._quit_if_no_wizard)  # after "fine-tune instead" pushes the next one

    def open_wizard_alone(self, run_dir: Path, which: str) -> None:
        """`run_dir`'s resume or fine-tune wizard on its own (`yolotui attach RUN --wizard`, which another host's
        yolotui opens over ssh -t): a launch opens the run's dashboard; a cancel quits the app."""
        if not Path(run_dir).is_dir():
            message = f"yolotui: error: {run_dir}: no such run folder"
            self.call_after_refresh(lambda: self.exit(2, message=message))  # once the home screen is up
            return
        (self.open_finetune if which == "finetune" else self.open_resume)(Path(run_dir))

    def _quit_if_no_wizard(self) -> None:
        if self.screen is getattr(self, "home", None):
            self.exit(0)

    def open_new_run(self) -> None:
        """The new-run wizard."""
        from yolotui.tui.screens.wizard_new_run import NewRunWizard

        self.push_screen(NewRunWizard(self.run_launcher(), project=self.new_run_project), self._opened)

    def open_new_ultralytics_run(self) -> None:
        """The new-run wizard for ultralytics' trainer (yolotui/tui/screens/wizard_ultralytics.py)."""
        from yolotui.tui.screens.wizard_ultralytics import UltralyticsNewRunWizard

        self.push_screen(UltralyticsNewRunWizard(self.run_launcher()), self._opened)

    def open_resume(self, run_dir: Path) -> None:
        """The resume wizard of `run_dir` (diagnosis first)."""
        from yolotui.tui.screens.wizard_resume import ResumeWizard

        self.push_screen(ResumeWizard(run_dir, self.run_launcher(), diagnose=self.run_diagnose,
                                      open_finetune=self.open_finetune), self._opened)

    def open_finetune(self, source: Path | None = None) -> None:
        """The fine-tune wizard, from `source` when given."""
        from yolotui.tui.screens.wizard_finetune import FinetuneWizard

        self.push_screen(FinetuneWizard(source, self.run_launcher()), self._opened)

    def open_restore(self) -> None:
        """Restore a mirrored run (yolotui restore); its dashboard opens when it is here."""
        from yolotui.tui.screens.restore_mirror import RestoreScreen

        self.push_screen(RestoreScreen(self.run_launcher(), project=self.new_run_project), self._opened)

    def open_stop(self, run_dir: Path) -> None:
        """Stop with confirmation."""
        from yolotui.tui.screens.confirm_stop import ConfirmStopScreen

        self.push_screen(ConfirmStopScreen(run_dir, self.run_launcher()))

    # -- quick actions ------------------------------------------------------------------------------------
    def save_checkpoint(self, run_dir: Path) -> None:
        """`yolotui save RUN` in a worker; the answer as a notification."""
        launcher = self.run_launcher()

        def call() -> None:
            result = launcher(save_args(str(run_dir)))
            self.call_from_thread(self.notify, result.message, title="checkpoint now",
                                  severity="information" if result.ok else "error", timeout=6)

        self.run_worker(call, thread=True, exit_on_error=False, group="save-now")

    def open_log(self, run_dir: Path) -> None:
        """Page the run's train.log in $PAGER (less by default), the TUI suspended meanwhile."""
        from textual.app import SuspendNotSupported

        from yolotui.runs.layout import TRAIN_LOG

        log = Path(run_dir) / TRAIN_LOG
        if not log.is_file():
            self.notify(f"{log}: no log yet", severity="warning", timeout=4)
            return
        argv = pager_argv(log)
        try:
            with self.suspend():
                self.run_in_terminal(argv)
        except SuspendNotSupported:
            self.notify(f"cannot hand the terminal to a pager here; run: yolotui logs {shlex.quote(str(run_dir))}",
                        severity="warning", timeout=6)
        except OSError as exc:
            self.notify(f"{argv[0]}: {exc}; set $PAGER", severity="error", timeout=6)

    def run_in_terminal(self, argv: list[str]) -> int:
        """Run `argv` on the real terminal (no shell) and wait for it, the app suspended: the children given the
        terminal (a pager; a remote dashboard or wizard over ssh -t). Every other child writes to tui.log."""
        from yolotui.tui.terminal import terminal_streams

        stdout, stderr = terminal_streams()
        return subprocess.call(argv, stdout=stdout, stderr=stderr)

    def copy_path(self, run_dir: Path) -> None:
        """Put the run folder on the clipboard (OSC 52: works over SSH in most terminals)."""
        self.copy_to_clipboard(str(run_dir))
        self.notify(f"copied {run_dir}", timeout=3)

    # -- key actions --------------------------------------------------------------------------------------
    def _with_run(self, act) -> None:
        remote = getattr(self.screen, "remote_run_action", None)  # a row of another host (tui/fleet_home.py)
        if callable(remote) and remote(getattr(act, "__name__", "")):
            return
        run_dir = self.current_run()
        if run_dir is None:
            self.notify("select a run first", severity="warning", timeout=3)
            return
        act(run_dir)

    def action_new_run(self) -> None:
        """Open the new-run wizard."""
        self.open_new_run()

    def action_resume_run(self) -> None:
        """Open the resume wizard for the current run."""
        self._with_run(self.open_resume)

    def action_finetune_run(self) -> None:
        """Open the fine-tune wizard from the current run."""
        self._with_run(self.open_finetune)

    def action_stop_run(self) -> None:
        """Stop the current run (with confirmation)."""
        self._with_run(self.open_stop)

    def action_save_checkpoint(self) -> None:
        """Ask the current run for a checkpoint now."""
        self._with_run(self.save_checkpoint)

    def action_open_log(self) -> None:
        """Page the current run's log."""
        self._with_run(self.open_log)

    def action_copy_path(self) -> None:
        """Copy the current run's folder."""
        self._with_run(self.copy_path)

    # -- command palette ----------------------------------------------------------------------------------
    def run_action_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Palette entries: the new-run wizard always, the run actions for the run of `screen`."""
        yield SystemCommand("New run", "Start training: the new-run wizard (n)", self.open_new_run)
        yield SystemCommand("New ultralytics run", "Start ultralytics' trainer, supervised: its wizard",
                            self.open_new_ultralytics_run)
        yield SystemCommand("Fine-tune", "Start a run from another run's weights (F)", self.open_finetune)
        yield SystemCommand("Restore a run from its mirror", "Fetch TARGET/RUN_NAME, check it, open it (--mirror)",
                            self.open_restore)
        run_dir = self.current_run(screen)
        if run_dir is None:
            return
        name = run_dir.name
        yield SystemCommand(f"Resume or extend {name}", "Diagnosis, then resume / extend / fine-tune (R)",
                            partial(self.open_resume, run_dir))
        yield SystemCommand(f"Fine-tune from {name}", "New data, frozen backbone, lower lr (F)",
                            partial(self.open_finetune, run_dir))
        yield SystemCommand(f"Stop {name}", "Checkpoint, then exit; force after the grace period (x)",
                            partial(self.open_stop, run_dir))
        yield SystemCommand(f"Checkpoint now: {name}", "Ask the trainer to write last.pt now (c)",
                            partial(self.save_checkpoint, run_dir))
        yield SystemCommand(f"Log of {name} in $PAGER", "Page train.log; the TUI comes back after (l)",
                            partial(self.open_log, run_dir))
        yield SystemCommand(f"Copy path of {name}", str(run_dir) + " (y)", partial(self.copy_path, run_dir))
