"""The `?` help screen: every key, and where the command palette reaches the rest."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

HELP_TEXT = """\
[b]yolotui[/b]: runs go on in the background; quitting this screen never stops one.

[b]Everywhere[/b]
  q          quit the TUI (runs keep going)
  ?          this help
  t          next theme (remembered)
  ctrl+p     command palette: every action, open any run, pick a theme

[b]Runs table[/b]
  ↑ ↓        move         enter   open the run's dashboard
  /          filter       esc     clear the filter
  s          sort by the next column (click a header to sort by it; again to reverse)
  r          reload now   p       the highlighted run's preview pane, shown or hidden
  space      mark / unmark a run     v       the marked runs side by side
  d          remove the highlighted run (ended runs only; asks first)

[b]Run dashboard[/b]
  esc        back to the runs table
  f          log tail full screen, and back
  g          the left chart: losses, metrics, learning rate, images per second
  r          reload now

[b]Run actions[/b] (on the table: the highlighted run; on a dashboard: its run)
  n          new run wizard          R   resume / extend (diagnosis first)
  F          fine-tune wizard        x   stop (checkpoint, then exit)
  c          checkpoint now          l   train.log in $PAGER
  y          copy the run folder

[b]In a wizard[/b]  (the `yolotui ...` line it will run is shown at the bottom)
  tab        next field; in a path field, first accepts the completion
  ctrl+s     launch (nothing launches while a field shows an error)
  esc        cancel

Everything shown is rebuilt from the run folder: after an SSH drop, run
[b]yolotui attach RUN[/b] (or open it from the table) and nothing is lost.
"""


class HelpScreen(ModalScreen[None]):
    """A modal list of keys; any of escape, q or ? closes it."""

    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("q", "close", "Close", show=False),
        Binding("question_mark", "close", "Close", show=False),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 84; max-width: 100%; height: auto; max-height: 100%;
        border: round $primary; background: $surface; padding: 0 1;
    }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(HELP_TEXT, id="help-text")

    def action_close(self) -> None:
        """Close the help."""
        self.dismiss(None)
