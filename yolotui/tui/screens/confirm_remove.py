"""Remove a run with confirmation (`d` on the runs table): through jobs.rm, the same use case as `yolotui rm`.

Only ended runs (finished, failed, stopped, interrupted) can be removed; a live one is refused before this
screen opens, with what to do instead. Enter (or y) drops the run from the list and keeps its folder; `D`
also deletes the folder from disk; Esc (or n) closes without removing anything.
"""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from yolotui.tui.actions import display_path


def refusal(run_dir: Path) -> str | None:
    """Why `run_dir` cannot be removed now (it is live), or None when it can."""
    from yolotui.runs import lock
    from yolotui.runs.layout import ENDED_STATES
    from yolotui.runs.status import effective_state

    state = effective_state(Path(run_dir))
    if lock.is_held(Path(run_dir)) or state not in ENDED_STATES:
        return (f"{Path(run_dir).name} is {state}: it cannot be removed while it runs; stop it first (x), "
                "then press d again")
    return None


class ConfirmRemoveScreen(ModalScreen[str | None]):
    """Confirm removing one ended run; dismisses with 'removed', 'deleted', or None (cancelled or refused)."""

    BINDINGS = [
        Binding("enter,y", "remove", "Remove from list"),
        Binding("D", "delete", "Remove and delete folder"),
        Binding("escape,n", "cancel", "Cancel"),
    ]
    DEFAULT_CSS = """
    ConfirmRemoveScreen { align: center middle; }
    ConfirmRemoveScreen > #remove {
        width: 76; max-width: 100%; height: auto; max-height: 100%;
        border: round $warning; background: $surface; padding: 0 1;
    }
    ConfirmRemoveScreen #remove-status { margin-top: 1; }
    ConfirmRemoveScreen #remove-status.-error { color: $error; }
    """

    def __init__(self, run_dir: Path) -> None:
        super().__init__()
        self.run_dir = Path(run_dir)

    def compose(self) -> ComposeResult:
        with Vertical(id="remove"):
            yield Static(f"Remove run [b]{self.run_dir.name}[/b] from the runs list?\n"
                         f"Its folder {display_path(self.run_dir)} stays on disk unless you press D.\n\n"
                         "enter/y  remove from the list     D  remove and delete the folder     esc  cancel",
                         id="remove-question")
            yield Static("", id="remove-status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#remove").border_title = f"remove {self.run_dir.name}"

    def action_remove(self) -> None:
        """Drop the run from the list; keep its folder."""
        self._remove(files=False)

    def action_delete(self) -> None:
        """Drop the run from the list and delete its folder."""
        self._remove(files=True)

    def action_cancel(self) -> None:
        """Close without removing anything."""
        self.dismiss(None)

    def _remove(self, files: bool) -> None:
        from yolotui.errors import UserError
        from yolotui.jobs.rm import RemoveRequest, remove

        try:
            remove(RemoveRequest([str(self.run_dir)], files=files))
        except UserError as exc:  # went live meanwhile, or the folder could not be deleted
            status = self.query_one("#remove-status", Static)
            status.update(str(exc))
            status.add_class("-error")
            return
        self.dismiss("deleted" if files else "removed")
