"""New-run wizard for ultralytics' trainer: python, model, data.yaml, epochs, batch, image size, device, workers,
extra key=value arguments, name -> `yolotui train --backend ultralytics ...`.

Only the choices that work for ultralytics are offered: its YOLOv9 models (a .yaml starts from scratch, a .pt
from ultralytics' pretrained weights, downloaded by ultralytics) or a path; no yolotui hyp file (ultralytics'
hyperparameters are key=value arguments: lr0=0.001 ...), no queue and no SLURM field (`yolotui train --backend
ultralytics` does not take them). The interpreter is probed (in a worker) for ultralytics and torch.
"""

from __future__ import annotations

import sys
from pathlib import Path

from textual.app import ComposeResult
from textual.widgets import Input, Select

from yolotui.errors import UserError
from yolotui.tui import wizard_checks as checks
from yolotui.tui.screens.wizard_base import WizardScreen, field_row
from yolotui.tui.widgets.path_input import PathInput

DEFAULT_PROJECT = "runs/detect"
MODEL_PATH = "path"
MODELS = [(f"yolov9{size}{suffix}  ({what})", f"yolov9{size}{suffix}") for suffix, what in
          ((".yaml", "from scratch"), (".pt", "pretrained, downloaded by ultralytics")) for size in "tsmce"]
DEFAULTS = {"epochs": "100", "batch": "16", "imgsz": "640", "workers": "8"}


class UltralyticsNewRunWizard(WizardScreen):
    """Start an ultralytics training run; launches `yolotui train --backend ultralytics` and opens its dashboard."""

    TITLE_TEXT = "new ultralytics run"

    def __init__(self, launcher=None, *, project: str = DEFAULT_PROJECT, values: dict[str, str] | None = None,
                 probe=None) -> None:
        super().__init__(launcher)
        self.project = project
        self.values = dict(values or {})
        self.probe = probe  # injected in tests: python -> facts dict
        self.python_facts: tuple[str, str | None] | None = None  # (python, error)

    def compose_form(self) -> ComposeResult:
        values = self.values
        yield field_row("python", Input(values.get("python", sys.executable), id="python", compact=True), "python",
                        "the interpreter that has ultralytics (checked)")
        model = values.get("model", "yolov9t.yaml")
        shipped = {value for _, value in MODELS}
        selected = model if model in shipped else MODEL_PATH
        options = [*MODELS, ("a model file (.yaml or .pt)…", MODEL_PATH)]
        yield field_row("model", Select(options, value=selected, allow_blank=False, id="model", compact=True), "model")
        path_row = field_row("model file", PathInput(model if selected == MODEL_PATH else "",
                                                     suffixes=(".yaml", ".yml", ".pt"), id="model-path",
                                                     placeholder="path/to/model.yaml or weights.pt"), "model-path")
        path_row.set_class(selected != MODEL_PATH, "hidden")
        yield path_row
        yield field_row("data.yaml", PathInput(values.get("data", ""), suffixes=(".yaml", ".yml"),
                                               placeholder="path/to/data.yaml (path, train, val, names)", id="data"),
                        "data")
        for key, label in (("epochs", "epochs"), ("batch", "batch size"), ("imgsz", "image size")):
            yield field_row(label, Input(values.get(key, DEFAULTS[key]), id=key, compact=True), key)
        yield field_row("device", Input(values.get("device", ""), placeholder="ultralytics picks (cpu, 0)",
                                        id="device", compact=True), "device")
        yield field_row("workers", Input(values.get("workers", DEFAULTS["workers"]), id="workers", compact=True),
                        "workers")
        yield field_row("extra", Input(values.get("extra", ""), placeholder="key=value ... (lr0=0.001 plots=False)",
                                       id="extra", compact=True), "extra", "ultralytics arguments, passed as given")
        name = values.get("name") or checks.free_name(self.project, "train")
        yield field_row("name", Input(name, id="name", compact=True), "name")

    def on_mount(self) -> None:
        super().on_mount()
        self.start_probe()

    # -- the interpreter ----------------------------------------------------------------------------------
    def start_probe(self) -> None:
        python = self._value("python")
        self.run_worker(lambda: self._probe(python), thread=True, exit_on_error=False, group="probe",
                        exclusive=True)

    def _probe(self, python: str) -> None:
        from yolotui.backends.ultralytics.launch import interpreter_lines

        try:
            if self.probe is not None:
                lines, error = self.probe(python), None
            else:
                lines, error = interpreter_lines(python), None
        except UserError as exc:
            lines, error = [], str(exc)
        self.app.call_from_thread(self._probed, python, lines, error)

    def _probed(self, python: str, lines: list[str], error: str | None) -> None:
        if python != self._value("python"):
            return
        self.python_facts = (python, error)
        self.show_hint("python", lines[0].removeprefix("trainer: ") if lines else "")
        self.show_error("python", error)

    # -- fields -------------------------------------------------------------------------------------------
    def _value(self, widget_id: str) -> str:
        return self.query_one(f"#{widget_id}", Input).value.strip()

    def _model_value(self) -> str:
        choice = self.query_one("#model", Select).value
        return self._value("model-path") if choice == MODEL_PATH else str(choice)

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "model":
            self.query_one("#model-path-field").set_class(event.value != MODEL_PATH, "hidden")
            self.show_error("model-path", None)
            self.refresh_command()

    def field_changed(self, widget_id: str) -> None:
        if widget_id == "python":
            self.start_probe()
            return
        self.show_error(widget_id, self.check_field(widget_id))

    def check_field(self, widget_id: str) -> str | None:
        """The error of one field now, or None."""
        try:
            if widget_id == "model-path" and self.query_one("#model", Select).value == MODEL_PATH:
                path = Path(self._value("model-path")).expanduser()
                if not path.is_file():
                    raise UserError(f"{path}: no such model file")
            elif widget_id == "data":
                checks.check_data(self._value("data"))
            elif widget_id in ("epochs", "batch", "imgsz"):
                checks.parse_int(self._value(widget_id), {"epochs": "epochs", "batch": "batch size",
                                                          "imgsz": "image size"}[widget_id], minimum=1)
            elif widget_id == "workers":
                checks.parse_int(self._value("workers"), "workers", minimum=0)
            elif widget_id == "extra":
                from yolotui.backends.ultralytics.recognise import extra_arguments

                extra_arguments(self._value("extra"))
            elif widget_id == "name":
                checks.check_new_name(self.project, self._value("name"))
        except UserError as exc:
            return str(exc)
        return None

    def validate(self) -> dict[str, str]:
        errors: dict[str, str] = {}
        for widget_id in ("model-path", "data", "epochs", "batch", "imgsz", "workers", "extra", "name"):
            error = self.check_field(widget_id)
            if error:
                errors[widget_id] = error
        if self.python_facts is None or self.python_facts[0] != self._value("python"):
            self._probe_now()
        if self.python_facts and self.python_facts[1]:
            errors["python"] = self.python_facts[1]
        return errors

    def _probe_now(self) -> None:
        from yolotui.backends.ultralytics.launch import interpreter_lines

        python = self._value("python")
        try:
            lines = self.probe(python) if self.probe is not None else interpreter_lines(python)
            self._probed(python, lines, None)
        except UserError as exc:
            self._probed(python, [], str(exc))

    def command_args(self) -> list[str] | None:
        model, data = self._model_value(), self._value("data")
        if not model or not data:
            return None
        from yolotui.backends.ultralytics.recognise import extra_arguments

        args = ["train", "--backend", "ultralytics", "--model", model, "--data", data, "--epochs",
                self._value("epochs"), "--batch-size", self._value("batch"), "--imgsz", self._value("imgsz")]
        if self._value("device"):
            args += ["--device", self._value("device")]
        if self._value("workers") != DEFAULTS["workers"]:
            args += ["--workers", self._value("workers")]
        if self._value("python") and self._value("python") != sys.executable:
            args += ["--python", self._value("python")]
        args += ["--project", self.project, "--name", self._value("name")]
        return args + extra_arguments(self._value("extra"))

    def launched_run(self, result):
        found = super().launched_run(result)
        return found or (Path(self.project).expanduser() / self._value("name")).resolve()
