"""Resume wizard: the run's diagnosis first, then only the choices that make sense for it.

The diagnosis (yolotui.health.report.diagnose_run, in a worker thread) shows the checkpoint verdicts,
config drift, the environment and the last failure with its class. The choices follow from it:

- last.pt resumable: resume as is; resume with a smaller batch (chosen first after an out-of-memory failure)
- finished: extend to N epochs (N above the epochs done)
- last.pt damaged or missing: resume from best.pt or an epoch checkpoint that is resumable (`--from`)
- always, when any weights exist: fine-tune instead (opens the fine-tune wizard on this run)

The run's backend narrows them (Backend.resume_rules: e.g. no `--from` where its trainer resumes from last.pt
only, and 'start over' first when last.pt is unusable). A run.yaml whose command, env or logging config this
user's yolotui did not write (the seal in yolotui.runs.runconfig) is shown, and the resume needs the trust box ticked
(`--trust`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual.app import ComposeResult
from textual.widgets import Checkbox, Input, RadioButton, RadioSet, Static

from yolotui import formatting
from yolotui.errors import UserError
from yolotui.tui import wizard_checks as checks
from yolotui.tui.actions import display_path, resume_args
from yolotui.tui.screens.wizard_base import WizardScreen, field_row

RESUME, SMALLER, EXTEND, FROM, FINETUNE = "resume", "smaller-batch", "extend", "from", "finetune"
MAX_OTHER_CHECKPOINTS = 6


@dataclass
class ResumeChoice:
    """One option of the wizard: `key` (RESUME, SMALLER, EXTEND, FROM, FINETUNE), its label, the checkpoint
    (file name in weights/) it resumes from when not last.pt, and the epochs done at that checkpoint."""

    key: str
    label: str
    checkpoint: str | None = None
    epoch: int | None = None

    @property
    def ident(self) -> str:
        """A unique id for the radio button."""
        suffix = (self.checkpoint or "").replace(".", "-")
        return f"choice-{self.key}" + (f"-{suffix}" if self.key == FROM else "")


@dataclass
class ResumeFacts:
    """What the worker gathered: the diagnosis, the run's batch size, other resumable checkpoints."""

    diagnosis: Any
    batch_size: int | None
    others: list[Any]
    error: str | None = None
    backend: str = "yolotui"  # run.yaml's backend: it narrows the choices (Backend.resume_rules)
    untrusted: str | None = None  # what the resume would run that this user's yolotui did not write


def gather_facts(run_dir: Path, diagnose: Callable[[Path], Any] | None = None) -> ResumeFacts:
    """Diagnose the run and read what the choices need (called in a worker thread)."""
    from yolotui.health.verdict import RESUMABLE, diagnose_checkpoint
    from yolotui.jobs.doctor import diagnose_run
    from yolotui.runs.layout import BEST_PT, LAST_PT, weights_dir

    run_dir = Path(run_dir)
    try:
        diagnosis = (diagnose or (lambda path: diagnose_run(path, logind=False)))(run_dir)
    except Exception as exc:  # shown in the wizard, never a traceback
        return ResumeFacts(None, None, [], f"could not diagnose {run_dir}: {exc}")
    batch = None
    try:
        from yolotui.config import load_yaml

        batch = int(load_yaml(run_dir / "opt.yaml", "opt.yaml").get("batch_size") or 0) or None
    except (UserError, ValueError, TypeError):
        batch = _backend_of(run_dir).saved_batch_size(run_dir)  # e.g. ultralytics keeps its arguments in args.yaml
    others = []
    skip = {LAST_PT, BEST_PT, Path(diagnosis.last.fallback or "").name}
    for path in sorted(weights_dir(run_dir).glob("*.pt"), key=lambda p: p.stat().st_mtime, reverse=True):
        if path.name in skip or len(others) >= MAX_OTHER_CHECKPOINTS:
            continue
        verdict = diagnose_checkpoint(path, find_fallback=False)
        if verdict.verdict == RESUMABLE:
            others.append(verdict)
    from yolotui.jobs.resume import untrusted
    from yolotui.runs.runconfig import read_backend

    return ResumeFacts(diagnosis, batch, others, backend=read_backend(run_dir), untrusted=untrusted(run_dir))


def _backend_of(run_dir: Path) -> Any:
    """The run's backend (yolotui's engine when run.yaml names one this install does not know)."""
    from yolotui.backends import get_backend
    from yolotui.runs.runconfig import read_backend

    try:
        return get_backend(read_backend(run_dir))
    except UserError:
        return get_backend(None)


def resume_choices(facts: ResumeFacts) -> list[ResumeChoice]:
    """The choices that make sense for a diagnosis (see the module docstring)."""
    from yolotui.health.report import EXTEND as EXTEND_ADVICE
    from yolotui.health.report import FINETUNE as FINETUNE_ADVICE
    from yolotui.health.report import LIVE, RESUME_FALLBACK
    from yolotui.health.report import RESUME as RESUME_ADVICE
    from yolotui.health.verdict import FINISHED, RESUMABLE

    diagnosis = facts.diagnosis
    if diagnosis is None or diagnosis.recommended == LIVE:
        return []
    last, best = diagnosis.last, diagnosis.best
    choices: list[ResumeChoice] = []
    if diagnosis.recommended == RESUME_ADVICE:
        choices.append(ResumeChoice(RESUME, "resume as is ("
                                            f"{formatting.epochs_done(last.epoch, last.total_epochs, last.step)})", epoch=last.epoch))
        if facts.batch_size and facts.batch_size > 1:
            choices.append(ResumeChoice(SMALLER, f"resume with a smaller batch (now {facts.batch_size})",
                                        epoch=last.epoch))
    if diagnosis.recommended == EXTEND_ADVICE:
        if last.verdict == FINISHED:
            choices.append(ResumeChoice(EXTEND, f"extend to N epochs ({formatting.epochs_done(last.epoch, last.total_epochs)})", epoch=last.epoch))
        elif last.fallback and last.fallback_verdict == FINISHED:
            choices.append(ResumeChoice(EXTEND, f"extend from {Path(last.fallback).name} to N epochs "
                                                f"({formatting.epochs_done(last.fallback_epoch, last.total_epochs)})", Path(last.fallback).name,
                                        last.fallback_epoch))
    if diagnosis.recommended == RESUME_FALLBACK and last.fallback:
        name = Path(last.fallback).name
        choices.append(ResumeChoice(FROM, f"resume from {name} "
                                          f"({formatting.epochs_done(last.fallback_epoch, last.total_epochs)}); "
                                          f"last.pt is {last.verdict}", name, last.fallback_epoch))
    if diagnosis.recommended in (RESUME_FALLBACK, FINETUNE_ADVICE) or last.verdict not in (RESUMABLE, FINISHED):
        seen = {c.checkpoint for c in choices}
        if best.verdict == RESUMABLE and "best.pt" not in seen:
            choices.append(ResumeChoice(FROM, "resume from best.pt "
                                              f"({formatting.epochs_done(best.epoch, best.total_epochs, best.step)})", "best.pt", best.epoch))
            seen.add("best.pt")
        for other in facts.others:
            name = Path(other.path).name
            if name not in seen:
                choices.append(ResumeChoice(FROM, f"resume from {name} "
                                                  f"({formatting.epochs_done(other.epoch, other.total_epochs, other.step)})", name, other.epoch))
    if diagnosis.recommended_checkpoint or best.verdict in (RESUMABLE, FINISHED):
        choices.append(ResumeChoice(FINETUNE, "fine-tune instead (new data, frozen backbone, lower lr)"))
    from yolotui.backends import get_backend

    try:
        rules = get_backend(facts.backend).resume_rules(diagnosis)
    except UserError:  # a backend this install does not know: the generic choices
        return choices
    choices = [c for c in choices if c.key not in rules.drop]
    if rules.first is not None:
        choices.insert(0, ResumeChoice(*rules.first))
    return choices


def diagnosis_text(facts: ResumeFacts) -> str:
    """The diagnosis block: verdicts, failure, drift, environment, advice (Rich markup escaped)."""
    from rich.markup import escape

    from yolotui.formatting import age as format_age

    if facts.error:
        return escape(facts.error)
    d = facts.diagnosis
    lines = []
    for label, verdict in (("last.pt", d.last), ("best.pt", d.best)):
        facts_ = []
        if verdict.epoch is not None:
            facts_.append(formatting.epochs_done(verdict.epoch, verdict.total_epochs, verdict.step))
        if verdict.age_s is not None:
            facts_.append(f"{format_age(verdict.age_s)} old")
        reason = f" — {verdict.reasons[0]}" if verdict.reasons and verdict.verdict not in ("resumable", "finished") \
            else ""
        lines.append(f"[b]{label:<8}[/b] {verdict.verdict.upper()}" + (f" ({', '.join(facts_)})" if facts_ else "")
                     + escape(reason))
    failure = d.last_failure
    if failure:
        what = failure.get("failure_class") or "exit"
        message = failure.get("message") or (f"signal {failure.get('exit_signal')}" if failure.get("exit_signal")
                                             else f"exit code {failure.get('exit_code')}")
        lines.append(f"[b]failure[/b]  {escape(str(what))}: {escape(str(message))}")
    if d.drift:
        shown = "; ".join(f"{item.file} {item.key}: {item.was} → {item.now}" for item in d.drift[:3])
        more = f" (+{len(d.drift) - 3} more)" if len(d.drift) > 3 else ""
        lines.append(f"[b]drift[/b]    {escape(shown)}{more}")
    else:
        lines.append("[b]drift[/b]    none since the start")
    env = d.environment
    if env is not None:
        current = env.current or {}
        gpus = ", ".join(dev.get("name", "?") for dev in current.get("devices") or []) or "no CUDA GPU"
        line = f"torch {current.get('torch') or '-'}, {gpus}"
        if env.issues:
            line += " · " + "; ".join(f"{i.severity}: {i.what}" for i in env.issues[:2])
        lines.append(f"[b]env[/b]      {escape(line)}")
    lines.append(f"[b]advice[/b]   {escape(d.advice or d.recommended)}")
    if facts.untrusted:
        lines.append(f"[b]untrusted[/b] {escape(facts.untrusted)}")
    return "\n".join(lines)


class ResumeWizard(WizardScreen):
    """Resume, extend, resume from another checkpoint, or hand over to the fine-tune wizard."""

    TITLE_TEXT = "resume"

    def __init__(self, run_dir: Path, launcher=None, *, diagnose: Callable[[Path], Any] | None = None,
                 open_finetune: Callable[[Path], None] | None = None) -> None:
        super().__init__(launcher)
        self.run_dir = Path(run_dir)
        self.diagnose = diagnose
        self.open_finetune = open_finetune
        self.facts: ResumeFacts | None = None
        self.choices: list[ResumeChoice] = []

    def compose_form(self) -> ComposeResult:
        yield Static(f"[b]run[/b]      {display_path(self.run_dir)}\ndiagnosing…", id="diagnosis")
        yield field_row("choice", Static("", id="choice-placeholder"), "choice")
        batch_row = field_row("batch size", Input("", id="batch", compact=True), "batch")
        batch_row.add_class("hidden")
        yield batch_row
        epochs_row = field_row("epochs", Input("", id="epochs", compact=True), "epochs")
        epochs_row.add_class("hidden")
        yield epochs_row
        trust_row = field_row("trust", Checkbox("run this folder's own command and settings (shown above)",
                                                id="trust", compact=True), "trust")
        trust_row.add_class("hidden")
        yield trust_row

    def on_mount(self) -> None:
        self.query_one("#wizard").border_title = f"resume {self.run_dir.name}"
        self.refresh_command()
        self.run_worker(self._gather, thread=True, exit_on_error=False, group="diagnose")

    def _gather(self) -> None:
        facts = gather_facts(self.run_dir, self.diagnose)
        self.app.call_from_thread(self.show_facts, facts)

    def show_facts(self, facts: ResumeFacts) -> None:
        """Show the diagnosis and offer its choices."""
        self.facts = facts
        run_line = f"[b]run[/b]      {display_path(self.run_dir)}"
        if facts.diagnosis is not None and facts.diagnosis.state:
            run_line += f"  ({facts.diagnosis.state})"
        self.query_one("#diagnosis", Static).update(run_line + "\n" + diagnosis_text(facts))
        self.choices = resume_choices(facts)
        self.query_one("#trust-field").set_class(not facts.untrusted, "hidden")
        placeholder = self.query_one("#choice-placeholder", Static)
        if not self.choices:
            from yolotui.health.report import LIVE

            live = facts.diagnosis is not None and facts.diagnosis.recommended == LIVE
            placeholder.update("the run is live: stop it first (x)" if live else
                               "nothing to resume: no usable checkpoint; start a new run (n)")
            self.refresh_command()
            return
        placeholder.remove()
        buttons = [RadioButton(choice.label, id=choice.ident) for choice in self.choices]
        radio = RadioSet(*buttons, id="choice")
        self.query_one("#choice-field .field-line").mount(radio)
        oom = bool(facts.diagnosis.last_failure and facts.diagnosis.last_failure.get("failure_class") == "oom")
        first = next((i for i, c in enumerate(self.choices) if c.key == SMALLER), 0) if oom else 0
        buttons[first].value = True
        self._prefill()
        self._choice_changed()
        radio.focus()

    def _prefill(self) -> None:
        batch = self.facts.batch_size if self.facts else None
        self.query_one("#batch", Input).value = str(max(1, batch // 2)) if batch else ""
        extend = self._choice_by_key(EXTEND)
        if extend is not None and extend.epoch is not None:
            self.query_one("#epochs", Input).value = str(extend.epoch + 10)

    def _choice_by_key(self, key: str) -> ResumeChoice | None:
        return next((c for c in self.choices if c.key == key), None)

    def selected(self) -> ResumeChoice | None:
        """The highlighted choice."""
        radios = self.query("#choice").results(RadioSet)
        for radio in radios:
            index = radio.pressed_index
            if 0 <= index < len(self.choices):
                return self.choices[index]
        return None

    def select(self, key: str, checkpoint: str | None = None) -> None:
        """Choose an option by key (and checkpoint for FROM)."""
        for index, choice in enumerate(self.choices):
            if choice.key == key and (checkpoint is None or choice.checkpoint == checkpoint):
                self.query_one("#choice", RadioSet).query(RadioButton)[index].value = True
                return
        raise KeyError(f"no choice {key} {checkpoint or ''}".strip())

    def on_radio_set_changed(self, event: RadioSet.Changed) -> None:
        self._choice_changed()

    def _choice_changed(self) -> None:
        choice = self.selected()
        key = choice.key if choice else None
        self.query_one("#batch-field").set_class(key != SMALLER, "hidden")
        self.query_one("#epochs-field").set_class(key != EXTEND, "hidden")
        for field_id in ("batch", "epochs"):
            self.show_error(field_id, None)
        self.refresh_command()

    # -- checks and command -------------------------------------------------------------------------------
    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        self.show_error("trust", None)
        self.refresh_command()

    def _trusted(self) -> bool:
        return any(box.value for box in self.query("#trust").results(Checkbox))

    def field_changed(self, widget_id: str) -> None:
        if widget_id in ("batch", "epochs"):  # checked as typed, not only on Ctrl+S
            self.show_error(widget_id, self.validate().get(widget_id))

    def validate(self) -> dict[str, str]:
        choice = self.selected()
        if choice is None:
            return {"choice": "nothing to choose yet" if self.facts is None else "no way to resume this run"}
        try:
            if choice.key == SMALLER:
                batch = checks.parse_int(self.query_one("#batch", Input).value, "batch size", minimum=1)
                current = self.facts.batch_size if self.facts else None
                if current and batch >= current:
                    raise UserError(f"batch size {batch}: must be below the current {current}")
            elif choice.key == EXTEND:
                epochs = checks.parse_int(self.query_one("#epochs", Input).value, "epochs", minimum=1)
                done = choice.epoch or 0
                if epochs <= done:
                    raise UserError(f"{epochs} is not above the current epoch ({done}): give at least {done + 1}")
        except UserError as exc:
            return {"batch" if choice.key == SMALLER else "epochs": str(exc)}
        if choice.key != FINETUNE and self.facts is not None and self.facts.untrusted and not self._trusted():
            return {"trust": "run.yaml was not written by yolotui on this machine: check what it runs (above) "
                             "and tick the box to run it"}
        return {}

    def launch_label(self) -> str:
        choice = self.selected()
        return "opens:" if choice is not None and choice.key == FINETUNE else "runs:"

    def command_args(self) -> list[str] | None:
        choice = self.selected()
        if choice is None:
            return None
        run = display_path(self.run_dir)
        trust = ["--trust"] if self._trusted() else []
        if choice.key == RESUME:
            return resume_args(run) + trust
        if choice.key == SMALLER:
            return resume_args(run, batch_size=int(self.query_one("#batch", Input).value)) + trust
        if choice.key == EXTEND:
            return resume_args(run, epochs=int(self.query_one("#epochs", Input).value),
                               from_ckpt=choice.checkpoint) + trust
        if choice.key == FROM:
            return resume_args(run, from_ckpt=choice.checkpoint) + trust
        return None

    def refresh_command(self) -> None:
        choice = self.selected()
        if choice is not None and choice.key == FINETUNE:
            from textual.widgets import Static as _Static

            self.query_one("#command", _Static).update(f"opens: the fine-tune wizard from {self.run_dir.name}")
            return
        super().refresh_command()

    def action_launch(self) -> None:
        choice = self.selected()
        if choice is not None and choice.key == FINETUNE:
            self.dismiss(None)
            if self.open_finetune is not None:
                self.open_finetune(self.run_dir)
            return
        super().action_launch()

    def launched_run(self, result):
        return super().launched_run(result) or self.run_dir
