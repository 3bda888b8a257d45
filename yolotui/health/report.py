"""A run's full diagnosis before a resume (checkpoints, drift, environment, logout survival) and its text form.

`diagnose_run(run_dir)` is what `yolotui doctor RUN` and the TUI's resume wizard show. `recommended`
is one of RECOMMENDATIONS; `advice` says it in a sentence naming the checkpoint to use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from yolotui import formatting
from yolotui.health.drift import DriftItem, check_drift, first_start_event
from yolotui.health.environment import EnvironmentReport, diagnose_environment
from yolotui.health.verdict import (
    CORRUPT,
    FINISHED,
    INCOMPLETE,
    MISSING,
    RESUMABLE,
    CheckpointVerdict,
    diagnose_checkpoint,
)
from yolotui.placement.logind import LogindInfo, check_logind
from yolotui.runs.layout import BEST_PT, LAST_PT, LIVE_STATES, RUN_YAML, weights_dir
from yolotui.runs.status import effective_state, read_status

RESUME = "resume"
RESUME_FALLBACK = "resume-from-fallback"
EXTEND = "extend-or-finetune"
FINETUNE = "finetune"
RESTART = "restart"
LIVE = "running"
RECOMMENDATIONS = (RESUME, RESUME_FALLBACK, EXTEND, FINETUNE, RESTART, LIVE)


@dataclass
class RunDiagnosis:
    """Everything doctor knows about a run; `recommended` is one of RECOMMENDATIONS."""

    run_dir: str
    last: CheckpointVerdict
    best: CheckpointVerdict
    recommended: str
    drift: list[DriftItem] = field(default_factory=list)
    environment: EnvironmentReport | None = None
    last_failure: dict[str, Any] | None = None
    # Further fields:
    advice: str = ""
    recommended_checkpoint: str | None = None
    state: str | None = None
    notes: list[str] = field(default_factory=list)
    logind: LogindInfo | None = None
    deep: dict[str, Any] | None = None
    launch_logout: dict[str, Any] | None = None  # run.yaml `logout`: how the supervisor was started
    slurm: dict[str, Any] | None = None  # a SLURM run: job_id, state, reason, nodes, time_left, storage
    gpu: dict[str, Any] | None = None  # GPU summary and slowness verdicts (health/gpu_report.py)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form."""
        return asdict(self)


def _planned_epochs(run_dir: Path) -> int | None:
    from yolotui.health.drift import _load_yaml

    run_yaml, _ = _load_yaml(run_dir / RUN_YAML)
    if isinstance(run_yaml, dict):
        for holder in (run_yaml, run_yaml.get("opt") if isinstance(run_yaml.get("opt"), dict) else {}):
            value = holder.get("epochs")
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


def _opt_epochs(folder: Path) -> int | None:
    """`epochs` of FOLDER/opt.yaml (the official trainer's plan), or None."""
    from yolotui.health.drift import _load_yaml

    opt, _ = _load_yaml(Path(folder) / "opt.yaml")
    value = opt.get("epochs") if isinstance(opt, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _recommend(last: CheckpointVerdict, best: CheckpointVerdict, state: str | None) -> tuple[str, str, str | None]:
    if state in LIVE_STATES:
        return LIVE, "the run is live: nothing to resume (stop it first to change anything)", None
    if last.verdict == RESUMABLE:
        return RESUME, (f"resume from {Path(last.path).name} "
                        f"({formatting.epochs_done(last.epoch, last.total_epochs, last.step)})"), last.path
    if last.verdict == FINISHED:
        return EXTEND, (f"training finished ({formatting.epochs_done(last.epoch, last.total_epochs)}): extend it with more epochs or fine-tune "
                        f"from {Path(last.path).name}"), last.path
    if last.verdict in (CORRUPT, MISSING) and last.fallback:
        name = Path(last.fallback).name
        what = "is damaged" if last.verdict == CORRUPT else "is missing"
        if last.fallback_verdict == RESUMABLE:
            return RESUME_FALLBACK, (f"{Path(last.path).name} {what}: resume from {name} "
                                     f"({formatting.epochs_done(last.fallback_epoch, last.total_epochs)})"), last.fallback
        if last.fallback_verdict == FINISHED:
            return EXTEND, f"{Path(last.path).name} {what}: extend or fine-tune from {name}", last.fallback
        return FINETUNE, f"{Path(last.path).name} {what}: fine-tune from {name} (it cannot resume)", last.fallback
    if last.verdict == INCOMPLETE:
        return FINETUNE, f"{Path(last.path).name} lacks what a resume needs: fine-tune from it", last.path
    if best.verdict in (RESUMABLE, FINISHED, INCOMPLETE):
        return FINETUNE, f"no usable last.pt: fine-tune from {Path(best.path).name}", best.path
    return RESTART, "no usable checkpoint: start the run again", None


def _is_behind(last: CheckpointVerdict, best: CheckpointVerdict) -> bool:
    """True when last.pt holds less training than best.pt (by epochs done, then step).

    Both are written at the same epoch end, so their times say little: a healthy run writes best.pt a moment
    after last.pt. The training position they hold shows whether a later save of last.pt did not land; only
    when last.pt cannot be read is its time (a minute or more before best.pt's) the evidence.
    """
    if last.epoch is not None and best.epoch is not None:
        return (last.epoch, last.step or 0) < (best.epoch, best.step or 0)
    if last.epoch is None and best.epoch is not None and last.mtime is not None and best.mtime is not None:
        return best.mtime > last.mtime + 60  # last.pt unreadable: only its time is left to go by
    return False


class ForeignRun(Protocol):
    """A run of another project's trainer (official YOLOv9, ultralytics) as its backend sees it (Backend.follow).

    `folder` is where that trainer writes results.csv and weights/; `env_lines` what its environment probe found;
    `drift_ignored()` the opt keys that trainer rewrites itself; `advice(...)` the command to suggest for a
    recommendation, or ''. Such a trainer resumes from last.pt only, so a damaged last.pt means a fine-tune.
    """

    folder: Path
    env_lines: list[str]

    def drift_ignored(self) -> frozenset[str]: ...

    def advice(self, recommended: str, run_dir: Path, stripped: bool) -> str: ...


def diagnose_run(run_dir: Path, environment: bool = True, logind: bool = True, verify_hash: bool = True,
                 follow: Callable[[Path, bool], ForeignRun | None] | None = None,
                 advise: Callable[[str, Path, Any], tuple[str, str] | None] | None = None) -> RunDiagnosis:
    """Diagnose a run directory: last.pt and best.pt verdicts, drift, environment, logout survival, advice.

    `follow(run_dir, probe)` is the run's backend's view of where its trainer writes (yolotui.jobs.doctor passes
    it); None: the run folder is the trainer's own. `advise(recommended, run_dir, last)` is the backend's own
    advice (Backend.doctor_advice), None to keep the generic one.
    """
    run_dir = Path(run_dir)
    status = read_status(run_dir)
    state = effective_state(run_dir, status) if status is not None else None
    official = follow(run_dir, environment) if follow is not None else None
    outputs = official.folder if official is not None else run_dir
    total = _planned_epochs(run_dir) or (_opt_epochs(outputs) if official is not None else None)
    folder = weights_dir(outputs)
    last = diagnose_checkpoint(folder / LAST_PT, total, verify_hash=verify_hash)
    best = diagnose_checkpoint(folder / BEST_PT, total, verify_hash=verify_hash, find_fallback=False)
    recommended, advice, chosen = _recommend(last, best, state)
    notes: list[str] = []
    behind = _is_behind(last, best)
    if behind and last.epoch is not None:
        notes.append(f"last.pt (epoch {last.epoch}, step {last.step or 0}) is behind best.pt (epoch {best.epoch}, "
                     f"step {best.step or 0}): the last save did not land; best.pt may hold later training")
    elif behind:
        notes.append(f"last.pt is older than best.pt (by {formatting.age(best.mtime - last.mtime)}) and unreadable: "
                     "the last save did not land; best.pt may hold later training")
    if last.age_s is not None:
        notes.append(f"last.pt written {formatting.age(last.age_s)} ago")
    info = last.info if last.info and (last.info.opt or last.info.hyp) else best.info
    # No checkpoint config: the first start event is the baseline, never an empty one (everything would drift).
    drift = check_drift(outputs, info.opt if info else None, info.hyp if info else None,
                        ignored=official.drift_ignored() if official is not None else frozenset())
    if official is not None:
        stripped = bool(last.info is not None and last.info.epoch == -1)
        command = official.advice(recommended, run_dir, stripped)
        if recommended == RESUME_FALLBACK:  # the official --resume takes last.pt only: fine-tune from the fallback
            recommended, advice = FINETUNE, f"{Path(last.path).name} is not usable: fine-tune from {Path(chosen).name}"
        elif recommended == EXTEND and stripped:
            recommended, advice = FINETUNE, f"training finished ({last.epoch} epochs) and stripped: fine-tune from it"
        if command:
            advice += f"; {command}"
        if str(outputs) != str(run_dir):
            notes.append(f"official trainer's folder: {outputs}")
        notes.extend(f"trainer {line}" for line in official.env_lines)
    own = advise(recommended, run_dir, last) if advise is not None else None
    if own is not None:  # a backend with its own advice keeps its arguments in the checkpoint: no files to drift
        drift = []
        recommended, command = own
        advice += f"; {command}" if command else ""
    if drift and recommended in (RESUME, RESUME_FALLBACK):
        advice += "; the config changed since the start (see drift): review it before resuming"
    start = first_start_event(run_dir)
    env_report = None
    if environment:
        versions = None
        for verdict in (last, best):
            if verdict.info and verdict.info.versions:
                versions = verdict.info.versions
                break
        env_report = diagnose_environment(versions, start)
    last_failure = None
    if status is not None and (status.failure_class or status.exit_code not in (None, 0) or status.exit_signal):
        last_failure = {"failure_class": status.failure_class, "message": status.message,
                        "exit_code": status.exit_code, "exit_signal": status.exit_signal,
                        "attempt": status.attempt, "ended": status.ended}
    return RunDiagnosis(run_dir=str(run_dir), last=last, best=best, recommended=recommended, drift=drift,
                        environment=env_report, last_failure=last_failure, advice=advice,
                        recommended_checkpoint=chosen, state=state, notes=notes,
                        logind=check_logind() if logind else None, launch_logout=_launch_logout(run_dir),
                        slurm=_slurm_facts(run_dir, status), gpu=_gpu_facts(run_dir, status))


def _gpu_facts(run_dir: Path, status: Any) -> dict[str, Any] | None:
    from yolotui.health.gpu_report import gpu_facts

    return gpu_facts(run_dir, status)


def _slurm_facts(run_dir: Path, status: Any) -> dict[str, Any] | None:
    """What SLURM says of a SLURM run's job, with the submit-time storage check; None for a local run."""
    from yolotui.runs.status import slurm_job_of

    job = slurm_job_of(status)
    if not job:
        return None
    from yolotui.runs.slurm_state import describe

    facts = describe(job, accounting=True)
    from yolotui.runs.runconfig import run_yaml_field

    record = run_yaml_field(run_dir, "slurm")
    if isinstance(record, dict):
        facts["storage"] = record.get("storage")
        facts["job_ids"] = record.get("job_ids")
    return facts


def _launch_logout(run_dir: Path) -> dict[str, Any] | None:
    """run.yaml's `logout` record (what the launcher applied), or None."""
    from yolotui.runs.runconfig import run_yaml_field

    record = run_yaml_field(run_dir, "logout")
    return record if isinstance(record, dict) else None


def _verdict_lines(label: str, verdict: CheckpointVerdict) -> list[str]:
    head = f"{label:<9} {verdict.verdict.upper()}"
    if verdict.verdict != MISSING:
        facts = []
        if verdict.epoch is not None:
            facts.append(formatting.epochs_done(verdict.epoch, verdict.total_epochs, verdict.step))
        if verdict.best_fitness is not None:
            facts.append(f"best fitness {verdict.best_fitness:.4f}")
        if verdict.size is not None:
            facts.append(formatting.size(verdict.size))
        if verdict.age_s is not None:
            facts.append(f"{formatting.age(verdict.age_s)} old")
        if verdict.kind and verdict.kind != "unknown":
            facts.append(f"{verdict.kind} format")
        if facts:
            head += "  (" + ", ".join(facts) + ")"
    return [head] + [f"          - {reason}" for reason in verdict.reasons]


def render_checkpoint_text(verdict: CheckpointVerdict) -> str:
    """The plain-text report for a single checkpoint file."""
    lines = [f"checkpoint {verdict.path}", *_verdict_lines("verdict", verdict)]
    return "\n".join(lines) + "\n"


def render_text(diagnosis: RunDiagnosis) -> str:
    """The plain-text report `yolotui doctor RUN` prints."""
    lines = [f"run       {diagnosis.run_dir}" + (f"  [{diagnosis.state}]" if diagnosis.state else "")]
    lines += _verdict_lines("last.pt", diagnosis.last)
    lines += _verdict_lines("best.pt", diagnosis.best)
    lines += [f"          note: {note}" for note in diagnosis.notes]
    if diagnosis.last_failure:
        failure = diagnosis.last_failure
        lines.append(f"failure   {failure.get('failure_class') or 'exit'}: "
                     f"{failure.get('message') or 'exit code ' + str(failure.get('exit_code'))}")
    if diagnosis.drift:
        lines.append(f"drift     {len(diagnosis.drift)} change(s) since the start:")
        for item in diagnosis.drift[:30]:
            lines.append(f"          {item.file}: {item.key}: {_short(item.was)} -> {_short(item.now)}")
    else:
        lines.append("drift     none")
    if diagnosis.environment is not None:
        env = diagnosis.environment.current
        gpu = ", ".join(d.get("name", "?") for d in env.get("devices") or []) or "no CUDA GPU"
        lines.append(f"env       torch {env.get('torch') or '-'}, torchvision {env.get('torchvision') or '-'}, "
                     f"CUDA {env.get('cuda') or '-'}, {gpu}" + ("  (cached probe)" if diagnosis.environment.cached else ""))
        for issue in diagnosis.environment.issues:
            change = f"{_short(issue.recorded)} -> {_short(issue.now)}: " if issue.recorded is not None else ""
            lines.append(f"          {issue.severity}: {issue.what}: {change}{issue.advice}")
    if diagnosis.launch_logout is not None:
        record = diagnosis.launch_logout
        lines.append(f"launched  {record.get('applied')}: {record.get('note')}")
        if record.get("warning"):
            lines.append(f"          warning: {record['warning']}")
    if diagnosis.slurm is not None:
        from yolotui.runs.slurm_state import short_text

        state = f" [{diagnosis.slurm['state']}]" if diagnosis.slurm.get("state") else ""
        lines.append(f"slurm     {short_text(diagnosis.slurm)}{state}")
        if diagnosis.slurm.get("storage"):
            lines.append(f"          {diagnosis.slurm['storage']}")
    if diagnosis.gpu is not None:
        from yolotui.health.gpu_report import report_lines

        lines += report_lines(diagnosis.gpu, width=10)
    if diagnosis.logind is not None:
        lines.append(f"logout    {diagnosis.logind.strategy}: {diagnosis.logind.advice}")
    if diagnosis.deep is not None:
        lines.append(f"deep      {_deep_line(diagnosis.deep)}")
    lines.append(f"advice    {diagnosis.recommended}: {diagnosis.advice}")
    return "\n".join(lines) + "\n"


def _deep_line(deep: dict[str, Any]) -> str:
    if deep.get("ok"):
        return f"torch.load(weights_only=True) loaded it ({len(deep.get('keys') or [])} keys)"
    return f"torch.load(weights_only=True) refused it: {deep.get('error')}"


def _short(value: Any, width: int = 40) -> str:
    text = "(absent)" if value is None else str(value)
    return text if len(text) <= width else text[: width - 1] + "…"
