"""Fine-tune wizard: source run or checkpoint, new data.yaml, freeze (backbone by default, or N layers),
epochs (30), lr scale (0.1), name -> `yolotui finetune --from ... --data ...`.

The source and the data are checked as they are typed (in worker threads). Freezing N layers that include
the detection head is refused when the new data has another class count than the source: those class
outputs are re-initialised and would stay untrained.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.app import ComposeResult
from textual.widgets import Input, RadioButton, RadioSet

from yolotui import formatting
from yolotui.errors import UserError
from yolotui.tui import wizard_checks as checks
from yolotui.tui.actions import DEFAULT_PROJECT, display_path, finetune_args
from yolotui.tui.screens.wizard_base import WizardScreen, field_row
from yolotui.tui.widgets.path_input import PathInput

FREEZE_MODES = ("backbone", "layers", "none")
FREEZE_LABELS = ("backbone (recommended)", "the first N layers", "nothing")
DEFAULT_EPOCHS = "30"
DEFAULT_LR_SCALE = "0.1"


class FinetuneWizard(WizardScreen):
    """Start a new run from another run's (or a checkpoint's) weights."""

    TITLE_TEXT = "fine-tune"

    def __init__(self, source: str | Path | None = None, launcher=None, *,
                 values: dict[str, str] | None = None) -> None:
        super().__init__(launcher)
        self.values = dict(values or {})
        if source is not None and "source" not in self.values:
            self.values["source"] = display_path(source)
        self.name_touched = "name" in self.values
        self.checked: dict[str, tuple[str, Any, str | None]] = {}  # field -> (value, facts, error)

    def compose_form(self) -> ComposeResult:
        values = self.values
        yield field_row("from", PathInput(values.get("source", ""), placeholder="run folder or name, or a .pt",
                                          suffixes=(".pt",), id="source"), "source")
        yield field_row("data.yaml", PathInput(values.get("data", ""), suffixes=(".yaml", ".yml"),
                                               placeholder="path/to/new/data.yaml (Tab completes)", id="data"), "data")
        mode = values.get("freeze", "backbone")
        buttons = [RadioButton(label, value=(key == mode), id=f"freeze-{key}")
                   for key, label in zip(FREEZE_MODES, FREEZE_LABELS)]
        yield field_row("freeze", RadioSet(*buttons, id="freeze"), "freeze")
        layers_row = field_row("layers (N)", Input(values.get("layers", "10"), id="layers", compact=True), "layers")
        layers_row.set_class(mode != "layers", "hidden")
        yield layers_row
        yield field_row("epochs", Input(values.get("epochs", DEFAULT_EPOCHS), id="epochs", compact=True), "epochs")
        yield field_row("lr scale", Input(values.get("lr_scale", DEFAULT_LR_SCALE), id="lr-scale", compact=True),
                        "lr-scale", "lr0 of the source run times this")
        yield field_row("name", Input(values.get("name", ""), id="name", compact=True), "name")

    def on_mount(self) -> None:
        super().on_mount()
        for field_id in ("source", "data"):
            if self._value(field_id):
                self.start_check(field_id)
        if not self.name_touched:
            self._suggest_name()

    # -- values -------------------------------------------------------------------------------------------
    def _value(self, widget_id: str) -> str:
        return self.query_one(f"#{widget_id}", Input).value.strip()

    def freeze_mode(self) -> str:
        """'backbone', 'layers' or 'none'."""
        index = self.query_one("#freeze", RadioSet).pressed_index
        return FREEZE_MODES[index] if 0 <= index < len(FREEZE_MODES) else "backbone"

    def project(self) -> str:
        """Where the new run goes: beside the source run (as `yolotui finetune` does), else runs/train."""
        facts = self.facts("source")
        if facts is not None and facts.run_dir:
            return str(Path(facts.run_dir).parent)
        return DEFAULT_PROJECT

    def _suggest_name(self) -> None:
        facts = self.facts("source")
        if facts is None:
            return
        stem = Path(facts.run_dir).name if facts.run_dir else Path(facts.checkpoint).stem
        self.query_one("#name", Input).value = checks.free_name(self.project(), f"{stem}-ft")
        self.name_touched = False

    # -- checks -------------------------------------------------------------------------------------------
    CHECKERS: dict[str, Callable[[str], Any]] = {"source": checks.source_facts, "data": checks.check_data}

    def start_check(self, field_id: str) -> None:
        """Check the source or data field in a worker thread (the newest edit wins)."""
        value = self._value(field_id)
        self.run_worker(lambda: self._check(field_id, value), thread=True, exit_on_error=False,
                        group=f"check-{field_id}", exclusive=True)

    def _check(self, field_id: str, value: str) -> None:
        facts, error = self._run_checker(field_id, value)
        self.app.call_from_thread(self.checked_field, field_id, value, facts, error)

    def _run_checker(self, field_id: str, value: str) -> tuple[Any, str | None]:
        try:
            return self.CHECKERS[field_id](value), None
        except UserError as exc:
            return None, str(exc)
        except Exception as exc:  # a library bug shows as the field's error, not a traceback
            return None, f"{type(exc).__name__}: {exc}"

    def checked_field(self, field_id: str, value: str, facts: Any, error: str | None) -> None:
        """Show a finished check (ignored when the field changed since)."""
        if value != self._value(field_id):
            return
        self.checked[field_id] = (value, facts, error)
        self.show_error(field_id, error if value else None)
        if field_id == "data":
            self.show_hint("data", facts.summary() if facts else "")
        else:
            self.show_hint("source", self._source_hint(facts) if facts else "")
            if not self.name_touched:
                self._suggest_name()
        self.refresh_command()

    @staticmethod
    def _source_hint(facts: checks.SourceFacts) -> str:
        parts = [f"{Path(facts.checkpoint).name} ({facts.verdict}, "
                 f"{formatting.epochs_done(facts.epoch, None)})"]
        if facts.nc is not None:
            parts.append(f"{facts.nc} classes")
        if facts.layers:
            parts.append(f"{facts.layers} layers, backbone {facts.backbone_layers}")
        return " · ".join(parts)

    def facts(self, field_id: str) -> Any:
        """The checked facts of 'source' or 'data' for the current text (checked now if stale)."""
        value = self._value(field_id)
        cached = self.checked.get(field_id)
        if cached is None or cached[0] != value:
            if not value:
                return None
            facts, error = self._run_checker(field_id, value)
            self.checked_field(field_id, value, facts, error)
            cached = self.checked.get(field_id)
        return cached[1] if cached else None

    def field_changed(self, widget_id: str) -> None:
        if widget_id in ("source", "data"):
            self.start_check(widget_id)
            return
        if widget_id == "name" and self.query_one("#name", Input).has_focus:
            self.name_touched = True
        test = dict(self._field_tests()).get(widget_id)
        if test is not None:  # checked as typed, not only on Ctrl+S (source and data: by their own checks)
            self.show_error(widget_id, _error_of(test))

    def on_radio_set_changed(self, event: RadioSet.Changed) -> None:
        self.query_one("#layers-field").set_class(self.freeze_mode() != "layers", "hidden")
        self.show_error("layers", None)
        self.refresh_command()

    def _freeze_value(self) -> str:
        data = self.facts("data") if self.freeze_mode() == "layers" else None
        source = self.facts("source") if self.freeze_mode() == "layers" else None
        return checks.check_freeze(self.freeze_mode(), self._value("layers"), source,
                                   data.nc if data is not None else None)

    def validate(self) -> dict[str, str]:
        errors: dict[str, str] = {}
        for field_id in ("source", "data"):
            value = self._value(field_id)
            self.facts(field_id)
            cached = self.checked.get(field_id)
            if not value:
                errors[field_id] = ("give a run (name or folder) or a checkpoint file" if field_id == "source"
                                    else "give the path of the new data set's data.yaml")
            elif cached and cached[2]:
                errors[field_id] = cached[2]
        for field_id, test in self._field_tests():
            error = _error_of(test)
            if error:
                errors[field_id] = error
        return errors

    def _field_tests(self) -> list[tuple[str, Callable[[], Any]]]:
        """(field id, check) for the typed fields: each check raises UserError when its field is wrong."""
        return [
            ("layers", self._freeze_value),
            ("epochs", lambda: checks.parse_int(self._value("epochs"), "epochs", minimum=1)),
            ("lr-scale", lambda: checks.parse_positive_float(self._value("lr-scale"), "lr scale")),
            ("name", lambda: checks.check_new_name(self.project(), self._value("name"))),
        ]

    def command_args(self) -> list[str] | None:
        source, data = self._value("source"), self._value("data")
        if not source or not data:
            return None
        mode = self.freeze_mode()
        freeze = {"backbone": "backbone", "none": "0"}.get(mode) or self._value("layers")
        args = finetune_args(source, data, freeze, int(self._value("epochs")),
                             float(self._value("lr-scale")), name=self._value("name"))
        checked = self.checked.get("source")
        facts = checked[1] if checked and checked[0] == source else None
        if facts is not None and facts.run_dir:
            from yolotui.backends import backend_names, get_backend

            for name in backend_names():  # e.g. an ultralytics run fine-tunes with ultralytics
                if get_backend(name).finetunes_own_runs(Path(facts.run_dir)):
                    args += ["--backend", get_backend(name).name]
                    break
        return args

    def launched_run(self, result):
        found = super().launched_run(result)
        return found or (Path(self.project()).expanduser() / self._value("name")).resolve()


def _error_of(test: Callable[[], Any]) -> str | None:
    """The UserError message of `test()`, or None when it passes."""
    try:
        test()
    except UserError as exc:
        return str(exc)
    return None
