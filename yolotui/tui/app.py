"""The yolotui Textual app: home (runs table) and run dashboards, themes, notifications.

The app is a client only: it reads run folders and never owns a run, so quitting it (or losing the SSH
connection it runs over) leaves every run going. `run_app` is what `yolotui`, `yolotui attach` and
`yolotui demo` call.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from yolotui.errors import UserError
from yolotui.tui import themes as theme_files
from yolotui.tui.app_actions import RunActionsMixin
from yolotui.tui.screens.home import COLUMNS, HomeScreen
from yolotui.tui.sources import make_sampler

GPU_INTERVAL_S = 1.0
REPLACED_COMMANDS = {"Keys"}  # Textual's palette entries that one of ours does better ("Help: keys")


class YolotuiApp(RunActionsMixin, App[int]):
    """Runs table and run dashboards over the run directories of the global index."""

    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses elsewhere still find it
    TITLE = "yolotui"
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("t", "next_theme", "Theme"),
    ]

    def __init__(self, run_dir: Path | None = None, theme: str | None = None, *,
                 sampler: Any = None, clock: Callable[[], float] = time.time,
                 gpu_interval: float | None = GPU_INTERVAL_S, remember_theme: bool = True,
                 wizard: str | None = None) -> None:
        super().__init__()
        self.start_run = Path(run_dir) if run_dir is not None else None
        self.start_wizard = wizard  # "resume" or "finetune": the run's wizard alone (`attach RUN --wizard`)
        self.requested_theme = theme
        self._sampler = sampler
        self.clock = clock
        self.gpu_interval = gpu_interval
        self.remember_theme = remember_theme
        self.theme_problems: list[str] = []
        self.run_states: dict[str, tuple[str, int]] = {}
        self.own_theme_names: list[str] = []
        self.home: HomeScreen | None = None
        self.farewell = ""  # what `q` leaves on the terminal (run_app prints it)
        self._register_themes()

    # -- themes -------------------------------------------------------------------------------------------
    def _register_themes(self) -> None:
        loaded, self.theme_problems = theme_files.load_themes()
        for theme in loaded:
            self.register_theme(theme)
            self.own_theme_names.append(theme.name)
        settings, ignored = theme_files.load_settings_checked()
        self.theme_problems += ignored
        wanted = self.requested_theme or settings.get("theme") or theme_files.DEFAULT_THEME
        if wanted not in self.available_themes:
            if self.requested_theme:
                raise UserError(f"unknown theme '{wanted}'; choose one of: {', '.join(self.theme_names())}")
            wanted = theme_files.DEFAULT_THEME if theme_files.DEFAULT_THEME in self.available_themes else "textual-dark"
        self.theme = wanted

    def theme_names(self) -> list[str]:
        """yolotui's own themes first, then Textual's."""
        others = sorted(name for name in self.available_themes if name not in self.own_theme_names)
        return [*self.own_theme_names, *others]

    def watch_theme(self, name: str) -> None:
        if self.remember_theme and self.is_running:
            theme_files.remember_theme(name)

    def action_next_theme(self) -> None:
        """Switch to the next theme (yolotui's first, then Textual's); the choice is remembered."""
        names = self.theme_names()
        position = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(position + 1) % len(names)]
        self.notify(f"theme: {self.theme}", timeout=1.5)

    # -- screens ------------------------------------------------------------------------------------------
    @property
    def sampler(self) -> Any:
        """The GPU sampler, created on first use (NVML starts only when a dashboard opens)."""
        if self._sampler is None:
            self._sampler = make_sampler()
        return self._sampler

    def on_mount(self) -> None:
        self.home = HomeScreen()
        self.push_screen(self.home)
        if self.start_run is not None and self.start_wizard:
            self.open_wizard_alone(self.start_run, self.start_wizard)
        elif self.start_run is not None:
            self.open_run(self.start_run)
        for problem in self.theme_problems:
            self.notify(problem, title="theme file skipped", severity="warning", timeout=8)

    def open_run(self, run_dir: Path) -> None:
        """Show a run's dashboard (a bad or missing folder shows a message instead)."""
        run_dir = Path(run_dir)
        if not run_dir.is_dir():
            self.notify(f"{run_dir}: no such run folder", severity="error")
            return
        from yolotui.tui.screens.dashboard import DashboardScreen  # imported on first use: faster start

        if isinstance(self.screen, DashboardScreen):
            self.pop_screen()
        self.push_screen(DashboardScreen(run_dir))

    def show_home(self) -> None:
        """Back to the runs table."""
        while len(self.screen_stack) > 2 and self.screen is not self.home:
            self.pop_screen()

    async def action_quit(self) -> None:
        """Quit the TUI; the runs go on, and the farewell line says so and how to come back."""
        self.farewell = self.farewell_text()
        self.exit()

    def farewell_text(self) -> str:
        """'yolotui: RUN goes on in the background (...); come back with `yolotui attach RUN`' for a dashboard's
        live run ('RUN finished; ...' for one that ended), or the live runs of the table."""
        run_dir = getattr(self.screen, "run_dir", None)
        if run_dir is not None:
            from yolotui.runs.layout import LIVE_STATES
            from yolotui.runs.status import effective_state

            name = Path(run_dir).name
            state = effective_state(Path(run_dir))
            if state not in LIVE_STATES:  # a run that ended does not go on: say how it ended instead
                return f"yolotui: {name} {state}; look at it again with `yolotui attach {name}`, or `yolotui` for every run"
            return (f"yolotui: {name} goes on in the background (quitting never stops a run); come back with "
                    f"`yolotui attach {name}`, or `yolotui` for every run")
        live = [r for r in (self.home.rows if self.home is not None else [])
                if r.summary.state in ("queued", "running", "restarting", "stopping")]
        if live:
            from yolotui.formatting import plural

            return (f"yolotui: {plural(len(live), 'run')} going on in the background (quitting never stops a "
                    "run); come back with `yolotui`")
        return "yolotui: come back with `yolotui` (runs always go on in the background)"

    def action_help(self) -> None:
        """Show the keys."""
        from yolotui.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    # -- notifications ------------------------------------------------------------------------------------
    def note_run_state(self, path: str, name: str, state: str, attempt: int) -> None:
        """Toast and ring the bell when a run seen before finishes, fails, restarts or is interrupted."""
        previous = self.run_states.get(path)
        self.run_states[path] = (state, attempt)
        if previous is None or previous == (state, attempt):
            return
        old_state, old_attempt = previous
        if state == "finished" and old_state != "finished":
            self.notify(f"{name} finished", title="run finished", timeout=8)
        elif state == "failed" and old_state != "failed":
            self.notify(f"{name} failed", title="run failed", severity="error", timeout=12)
        elif state == "restarting" or attempt > old_attempt:
            self.notify(f"{name} restarting (attempt {attempt})", title="run restarted", severity="warning",
                        timeout=8)
        elif state == "interrupted" and old_state != "interrupted":
            self.notify(f"{name}: supervisor gone; resume it with `yolotui resume`", title="run interrupted",
                        severity="warning", timeout=12)
        else:
            return
        self.bell()

    # -- command palette ----------------------------------------------------------------------------------
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Every palette entry once: Textual's "Keys" gives way to "Help: keys" (every key), and a title
        seen before (two runs of the same name) is told apart by its folder."""
        seen: set[str] = set()
        for command in self._all_system_commands(screen):
            title = command.title
            if title in seen and title.startswith("Open run "):
                title = f"{title} ({command.help.rpartition(' · ')[2]})"
                command = SystemCommand(title, command.help, command.callback, command.discover)
            if title in seen:
                continue
            seen.add(title)
            yield command

    def _all_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from (c for c in super().get_system_commands(screen) if c.title not in REPLACED_COMMANDS)
        yield SystemCommand("Help: keys", "Show every key", self.action_help)
        yield SystemCommand("Next theme", "Switch to the next theme (remembered)", self.action_next_theme)
        yield SystemCommand("Runs table", "Back to the table of every run", self.show_home)
        yield from self.run_action_commands(screen)
        home = self.home
        if home is not None:
            yield SystemCommand("Reload runs", "Read every run folder again", home.action_reload)
            yield SystemCommand("Filter runs", "Filter the runs table (/)", self._filter_runs)
            yield SystemCommand("Compare marked runs", "The runs marked with space, side by side (v)",
                                home.action_compare)
            for column_index, column in enumerate(COLUMNS):
                yield SystemCommand(f"Sort runs by {column}", "Sort the runs table (again: reverse)",
                                    partial(self._sort_runs, column_index), discover=False)
            for row in home.rows:
                yield SystemCommand(f"Open run {row.summary.name}", f"{row.summary.state} · {row.summary.path}",
                                    partial(self.open_run, Path(row.summary.path)), discover=False)
        if type(screen).__name__ == "DashboardScreen":
            yield SystemCommand("Reload run", "Read this run's folder again", screen.action_reload)
            yield SystemCommand("Log full screen", "Toggle the log tail full screen", screen.action_toggle_log)

    def _filter_runs(self) -> None:
        self.show_home()
        if self.home is not None:
            self.home.action_filter()

    def _sort_runs(self, column: int) -> None:
        self.show_home()
        if self.home is not None:
            self.home.set_sort(column)


def run_app(run_dir: Path | None = None, theme: str | None = None, wizard: str | None = None) -> int:
    """Open the TUI: on the runs table, on `run_dir`'s dashboard, or on its `wizard` ("resume", "finetune")
    alone. Returns the exit status.

    Only Textual writes to the terminal meanwhile; anything else (children, warnings, libraries) goes to the
    TUI's log (yolotui.tui.terminal)."""
    from yolotui.tui.terminal import guarded_terminal

    with guarded_terminal():
        app = YolotuiApp(run_dir=run_dir, theme=theme, wizard=wizard)
        result = app.run()
    if app.farewell:
        print(app.farewell)
    return int(result or 0)
