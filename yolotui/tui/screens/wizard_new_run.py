"""New-run wizard: model, data.yaml, epochs, batch, image size, device, hyp, workers, name -> `yolotui train ...`.

Two optional fields queue the run instead of starting it: `start after` (a run's name: --after RUN) and
`when free` ('idle', or free memory such as 20G: --when-free [MEM]).

The model is a shipped config (listed with parameters and GFLOPs from configs/models/summary.json) or a
YAML path; the data.yaml is checked as it is typed (classes and image counts shown, or the reason it does
not load); the device list comes from telemetry (GPUs with their free memory, and the CPU). Where the user's
settings.yaml has a `slurm:` section (a cluster's login node), a "SLURM job" field offers to submit the run:
blank runs it here, `yes` submits it with the settings' defaults, and sbatch options (`--time=4:00:00
--gpus=2`) are added to them. Where hosts are configured (`yolotui hosts add`), a "where" field starts the run
on one of them (yolotui.tui.fleet_wizard).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.app import ComposeResult
from textual.widgets import Input, Select

from yolotui.errors import UserError
from yolotui.tui import fleet_wizard
from yolotui.tui import wizard_checks as checks
from yolotui.tui.actions import DEFAULT_PROJECT, train_args
from yolotui.tui.screens.wizard_base import WizardScreen, field_row
from yolotui.tui.widgets.path_input import PathInput

MODEL_PATH = "path"  # the Select value that means "a model YAML file"
DEFAULT_MODEL = "yolov9-s"
DEFAULTS = {"epochs": "100", "batch": "16", "imgsz": "640", "workers": "8"}


class NewRunWizard(WizardScreen):
    """Start a training run; launches `yolotui train` and opens its dashboard."""

    TITLE_TEXT = "new run"

    def __init__(self, launcher=None, *, project: str = DEFAULT_PROJECT, values: dict[str, str] | None = None,
                 sampler: Any = None) -> None:
        super().__init__(launcher)
        self.project = project
        self.values = dict(values or {})
        self.sampler = sampler
        self.gpu_indices: list[int] | None = None
        self.device_touched = "device" in self.values
        self.data_facts: tuple[str, checks.DataFacts | None, str | None] | None = None
        self.slurm_defaults = _slurm_defaults()  # None: no `slurm:` in settings.yaml, no SLURM field
        self.hosts = fleet_wizard.host_names()  # []: no hosts configured, no "where" field

    def compose_form(self) -> ComposeResult:
        values = self.values
        if self.hosts:
            yield field_row("where", Input(values.get("host", ""), placeholder=fleet_wizard.placeholder(self.hosts),
                                           id="host", compact=True), "host", "on a host, paths are the host's")
        options = [(choice.label, choice.name) for choice in checks.model_choices()]
        options.append(("a model YAML file…", MODEL_PATH))
        model = values.get("model", DEFAULT_MODEL)
        shipped = {value for _, value in options}
        selected = model if model in shipped else MODEL_PATH
        yield field_row("model", Select(options, value=selected, allow_blank=False, id="model", compact=True), "model")
        path_row = field_row("model yaml", PathInput(model if selected == MODEL_PATH else "", suffixes=(".yaml", ".yml"),
                                                     placeholder="path/to/model.yaml", id="model-path"), "model-path")
        path_row.set_class(selected != MODEL_PATH, "hidden")
        yield path_row
        yield field_row("data.yaml", PathInput(values.get("data", ""), suffixes=(".yaml", ".yml"),
                                               placeholder="path/to/data.yaml (Tab completes)", id="data"), "data")
        for key, label in (("epochs", "epochs"), ("batch", "batch size"), ("imgsz", "image size")):
            yield field_row(label, Input(values.get(key, DEFAULTS[key]), id=key, compact=True), key)
        yield field_row("device", Input(values.get("device", ""), placeholder="reading GPUs…", id="device",
                                        compact=True), "device", "reading GPUs…")
        yield field_row("hyp", PathInput(values.get("hyp", ""), suffixes=(".yaml", ".yml"),
                                         placeholder="chosen by run length (short-run / scratch-high)", id="hyp"), "hyp")
        yield field_row("workers", Input(values.get("workers", DEFAULTS["workers"]), id="workers", compact=True),
                        "workers")
        name = values.get("name") or checks.free_name(self.project, "exp")
        yield field_row("name", Input(name, id="name", compact=True), "name")
        yield field_row("start after", Input(values.get("after", ""), placeholder="now (or a run's name: queued)",
                                             id="after", compact=True), "after")
        yield field_row("when free", Input(values.get("when_free", ""), id="when-free", compact=True,
                                                placeholder="now (or GPUs idle, or with 20G free)"), "when-free")
        if self.slurm_defaults is not None:
            hint = "settings.yaml: " + (", ".join(f"{k} {v}" for k, v in self.slurm_defaults.items()) or "no defaults")
            yield field_row("SLURM job", Input(values.get("slurm", ""), id="slurm", compact=True,
                                               placeholder="blank: here · yes · --time=4:00:00 --gpus=2"),
                            "slurm", hint)

    def on_mount(self) -> None:
        super().on_mount()
        self.run_worker(self._read_gpus, thread=True, exit_on_error=False, group="gpus")
        if self.values.get("data"):
            self.field_changed("data")

    # -- telemetry ----------------------------------------------------------------------------------------
    def _sample(self) -> Any:
        from yolotui.tui.sources import safe_sample

        sampler = self.sampler if self.sampler is not None else getattr(self.app, "sampler", None)
        return safe_sample(sampler) if sampler is not None else None

    def _read_gpus(self) -> None:
        snapshot = self._sample()
        self.app.call_from_thread(self.show_devices, checks.device_choices(snapshot))

    def show_devices(self, choices: list[checks.DeviceChoice]) -> None:
        """Show the devices telemetry found; pick the GPU with the most free memory unless the user typed one."""
        self.gpu_indices = [int(c.value) for c in choices if c.value != checks.CPU]
        self.show_hint("device", " · ".join(c.label for c in choices))
        device = self.query_one("#device", Input)
        device.placeholder = "cpu, 0 or 0,1"
        if not self.device_touched:
            device.value = choices[0].value
            self.device_touched = False
        self.refresh_command()

    # -- checks -------------------------------------------------------------------------------------------
    def _value(self, widget_id: str) -> str:
        return self.query_one(f"#{widget_id}", Input).value.strip()

    def _model_value(self) -> str:
        choice = self.query_one("#model", Select).value
        return self._value("model-path") if choice == MODEL_PATH else str(choice)

    def field_changed(self, widget_id: str) -> None:
        if widget_id == "device" and self.query_one("#device", Input).has_focus:
            self.device_touched = True
        if widget_id == "data":
            self.run_worker(lambda: self._check_data(self._value("data")), thread=True, exit_on_error=False,
                            group="data-check", exclusive=True)
            return
        self.show_error(widget_id, self.check_field(widget_id))  # checked as typed, not only on Ctrl+S

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "model":
            self.query_one("#model-path-field").set_class(event.value != MODEL_PATH, "hidden")
            self.show_error("model-path", None)
            self.refresh_command()

    def _check_data(self, value: str) -> None:
        try:
            facts, error = checks.check_data(value), None
        except UserError as exc:
            facts, error = None, str(exc)
        self.app.call_from_thread(self._data_checked, value, facts, error)

    def _data_checked(self, value: str, facts: checks.DataFacts | None, error: str | None) -> None:
        if value != self._value("data"):
            return  # an older check finished after a newer edit
        self.data_facts = (value, facts, error)
        self.show_hint("data", facts.summary() if facts else "")
        self.show_error("data", error if value and not self.remote_host() else None)  # a host's path: its own

    def data_error(self) -> str | None:
        """The data.yaml check for the current text (cached from the live check when it is current)."""
        value = self._value("data")
        if self.data_facts is None or self.data_facts[0] != value:
            self._check_data_now(value)
        return self.data_facts[2] if self.data_facts else None

    def _check_data_now(self, value: str) -> None:
        try:
            facts, error = checks.check_data(value), None
        except UserError as exc:
            facts, error = None, str(exc)
        self._data_checked(value, facts, error)

    def check_field(self, widget_id: str) -> str | None:
        """The error of one field now, or None."""
        try:
            if widget_id == "model-path":
                if self.query_one("#model", Select).value == MODEL_PATH:
                    checks.check_model_path(self._value("model-path"))
            elif widget_id in ("epochs", "batch", "imgsz"):
                checks.parse_int(self._value(widget_id), {"epochs": "epochs", "batch": "batch size",
                                                          "imgsz": "image size"}[widget_id], minimum=1)
            elif widget_id == "workers":
                checks.parse_int(self._value("workers"), "workers", minimum=0)
            elif widget_id == "device":
                if self.gpu_indices is None:
                    self.show_devices(checks.device_choices(self._sample()))
                checks.check_device(self._value("device"), self.gpu_indices or [])
            elif widget_id == "hyp":
                self._check_hyp(self._value("hyp"))
            elif widget_id == "name":
                checks.check_new_name(self.project, self._value("name"))
            elif widget_id == "after" and self._value("after"):
                from yolotui.runs.resolve import resolve_run

                resolve_run(self._value("after"))
            elif widget_id == "when-free" and self._value("when-free"):
                from yolotui.placement.queue import gpu_indices, parse_memory

                if self._when_free():
                    parse_memory(self._when_free())
                gpu_indices(self._value("device") or checks.CPU)
            elif widget_id == "slurm":
                self.slurm_options()
            elif widget_id == "host":
                fleet_wizard.check_host(self._value("host"), self.hosts)
        except UserError as exc:
            return str(exc)
        return None

    @staticmethod
    def _check_hyp(value: str) -> None:
        if not value:
            return
        from yolotui.config import load_hyp
        from yolotui.configs import resolve_hyp

        load_hyp(resolve_hyp(value))

    def validate(self) -> dict[str, str]:
        errors: dict[str, str] = {}
        fields = ["model-path", "data", "epochs", "batch", "imgsz", "device", "hyp", "workers", "name", "after",
                  "when-free"]
        if self.remote_host():  # the host's yolotui checks its own files and GPUs
            fields = [f for f in fields if f not in fleet_wizard.LOCAL_CHECKS]
        for widget_id in fields + (["slurm"] if self.slurm_defaults is not None else []) + (
                ["host"] if self.hosts else []):
            error = self.data_error() if widget_id == "data" else self.check_field(widget_id)
            if error:
                errors[widget_id] = error
        return errors

    def command_args(self) -> list[str] | None:
        model, data = self._model_value(), self._value("data")
        if not model or not data:
            return None
        args = train_args(cfg=model, data=data, epochs=self._value("epochs"), batch_size=self._value("batch"),
                          imgsz=self._value("imgsz"), device=self._value("device") or checks.CPU,
                          hyp=self._value("hyp"), name=self._value("name"), project=self.project,
                          workers=self._value("workers") if self._value("workers") != DEFAULTS["workers"] else None,
                          after=self._value("after"),
                          when_free=None if not self._value("when-free") else self._when_free(),
                          slurm=self.slurm_options() if self.slurm_defaults is not None else None)
        return args + ["--host", self.remote_host()] if self.remote_host() else args

    def remote_host(self) -> str:
        """The host the run starts on ('' for here)."""
        return self._value("host") if self.hosts and self._value("host") != "local" else ""

    def _when_free(self) -> str:
        """The --when-free value: '' for 'idle' (no process on the GPUs), else the amount typed."""
        value = self._value("when-free")
        return "" if value.lower() in ("idle", "yes", "free") else value

    def slurm_options(self) -> list[str] | None:
        """The SLURM field: None to run here, else the sbatch options to add (UserError when malformed)."""
        import shlex

        text = self._value("slurm")
        if not text:
            return None
        if text.lower() in ("yes", "y", "slurm"):
            return []
        try:
            options = shlex.split(text)
        except ValueError as exc:
            raise UserError(f"SLURM job: {exc}; give sbatch options, e.g. --time=4:00:00") from None
        for option in options:
            if not option.startswith("-"):
                raise UserError(f"SLURM job: {option!r} is not an sbatch option; write them as --name=value")
        return options

    def launched_run(self, result):
        if self.remote_host():
            return None  # it is on the host: the runs table shows it (HOST:NAME) at its next reading
        found = super().launched_run(result)
        return found or (Path(self.project).expanduser() / self._value("name")).resolve()


def _slurm_defaults() -> dict[str, Any] | None:
    """settings.yaml's `slurm:` mapping, or None when it has none (or cannot be read)."""
    from yolotui.placement.slurm import settings_defaults, settings_has_slurm

    try:
        return settings_defaults() if settings_has_slurm() else None
    except UserError:
        return None
