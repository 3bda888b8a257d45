"""Starting a training run's trainer under the supervisor: option files, process layout, backend command.

Shared by new run, resume, fine-tune and demo. Returns warnings instead of printing them (the caller
decides how to show them); raises UserError before anything detaches.

Also what a started run's use case returns (StartedRun), and what `--json` prints for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yolotui.backends import ENGINE, get_backend
from yolotui.backends.base import CommandRequest
from yolotui.config import opt_yaml_dict, save_yaml
from yolotui.errors import UserError
from yolotui.placement.distributed import plan_launch, run_yaml_entry, sync_bn_warning
from yolotui.runs import layout


@dataclass
class StartedRun:
    """A run that new run, resume, fine-tune or demo just started (its supervisor holds the lock).

    `verb` says what happened ('started', 'resumed', 'extending'); `warnings` are for the user; `notes`
    are facts worth a line (e.g. 'resumed from epoch 3, batch 10 of 20 epochs').
    """

    name: str
    run_dir: Path
    state: str
    verb: str = "started"
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    slurm_job: str | None = None  # the SLURM job id when the run was submitted to SLURM
    command: list[str] = field(default_factory=list)  # what the supervisor runs (status.json's command)
    notify_command: str | None = None  # a hook command the run's own run.yaml adds (never set by yolotui)

    def to_json(self) -> dict[str, Any]:
        """{'name', 'folder', 'state', 'verb', 'warnings', 'command'} (+ 'slurm_job', 'notify_command'): what
        `--json` prints."""
        data = {"name": self.name, "folder": str(self.run_dir), "state": self.state, "verb": self.verb,
                "warnings": list(self.warnings), "command": list(self.command)}
        if self.slurm_job:
            data["slurm_job"] = self.slurm_job
        if self.notify_command:
            data["notify_command"] = self.notify_command
        return data


def started(run_dir: Path, verb: str, warnings: list[str], notes: list[str] | None = None) -> StartedRun:
    """A StartedRun for `run_dir`, its state read back from status.json; a SLURM run's job id and the
    submit-time storage check are added to its notes (or warnings)."""
    from yolotui.runs.status import effective_state, read_status, slurm_job_of

    run_dir = Path(run_dir)
    status = read_status(run_dir)
    job = slurm_job_of(status)
    warnings, notes = list(warnings), list(notes or [])
    if job:
        from yolotui.runs.runconfig import run_yaml_field

        record = run_yaml_field(run_dir, "slurm") or {}
        if record.get("storage"):
            (warnings if record.get("storage_warning") else notes).append(str(record["storage"]))
        notes.append(f"submitted as SLURM job {job} ({run_dir / 'slurm.sh'}); `yolotui ls` shows its state")
    from yolotui.runs.runconfig import run_yaml_field

    own_notify = run_yaml_field(run_dir, "notify")
    hook = own_notify.get("command") if isinstance(own_notify, dict) else None
    return StartedRun(name=run_dir.name, run_dir=run_dir, state=effective_state(run_dir, status), verb=verb,
                      warnings=warnings, notes=notes, slurm_job=job,
                      command=[str(a) for a in (status.command if status is not None and status.command else [])],
                      notify_command=hook if isinstance(hook, str) and hook.strip() else None)


DEFAULT_MAX_ATTEMPTS = 5  # attempts in all (the first and 4 restarts)


def write_run_files(run_dir: Path, opt: dict[str, Any], hyp: dict[str, Any]) -> None:
    """opt.yaml (official keys, save_dir set) and hyp.yaml, each written atomically."""
    save_yaml(Path(run_dir) / layout.OPT_YAML, opt_yaml_dict({**opt, "save_dir": str(run_dir)}))
    save_yaml(Path(run_dir) / layout.HYP_YAML, hyp)


def restart_limit(max_restarts: int | None, max_attempts: int | None) -> int:
    """Attempts in all from --max-restarts N (N + 1) or --max-attempts N (N); default 5."""
    if max_restarts is not None and max_attempts is not None:
        raise UserError("give --max-restarts or --max-attempts, not both")
    if max_restarts is not None:
        if max_restarts < 0:
            raise UserError(f"--max-restarts {max_restarts}: must be 0 or more")
        return max_restarts + 1
    if max_attempts is not None and max_attempts < 1:
        raise UserError(f"--max-attempts {max_attempts}: must be at least 1")
    return DEFAULT_MAX_ATTEMPTS if max_attempts is None else max_attempts


def start_training(run_dir: Path, opt: dict[str, Any], overrides: dict[str, Any] | None = None,
                   max_attempts: int = DEFAULT_MAX_ATTEMPTS, dist_flags: dict[str, Any] | None = None,
                   backoff_s: float | None = None, backend: str = ENGINE,
                   queue: dict[str, Any] | None = None, slurm: Any | None = None,
                   run_extra: dict[str, Any] | None = None, lock_fd: int | None = None) -> list[str]:
    """Launch the trainer for `run_dir` under a detached supervisor; returns warnings about the layout.

    `overrides` (resume) holds the changed options; `dist_flags` the process-layout flags (nproc_per_node,
    nnodes, node_rank, rdzv_endpoint ...; see yolotui.placement.distributed). UserError on bad input, before
    anything detaches. `queue` (yolotui.jobs.queue.queue_spec) makes the run wait in state `queued` first;
    `slurm` (runs.slurm.SlurmOptions) submits the supervisor as a SLURM job instead of starting it here.
    `run_extra`: RunExtras.entries() (notify, watchdog, logging); the run's earlier entries not given again
    are kept (yolotui.jobs.runextras).
    `lock_fd` is the run's lock taken by the caller before it wrote opt.yaml: this function
    owns it from the call on and closes it whatever happens (launch hands it to the supervisor).
    """
    from yolotui.jobs.runextras import carried_over
    from yolotui.placement.launcher import launch
    from yolotui.runs import lock

    try:
        run_dir = Path(run_dir)
        device = str((overrides or {}).get("device") or opt.get("device") or "")
        batch_size = int((overrides or {}).get("batch_size") or opt.get("batch_size") or 1)
        plan, warnings = plan_launch(device, batch_size, dist_flags)
        note = sync_bn_warning(bool(opt.get("sync_bn")), device, plan)
        chosen = get_backend(backend)
        request = CommandRequest(run_dir=run_dir, opt=dict(opt), overrides=dict(overrides or {}), layout=plan)
        spec = chosen.resume_command(request) if overrides is not None else chosen.new_run_command(request)
        extra = {**spec.extra, "distributed": run_yaml_entry(plan, dist_flags), **carried_over(run_dir, run_extra or {})}
    except BaseException:
        lock.release(lock_fd)
        raise
    launch(run_dir, spec.command, name=run_dir.name, backend=chosen.name,
           device=str(opt.get("device") or ""), max_attempts=max_attempts, env=spec.env, cwd=spec.cwd,
           **({"backoff_s": float(backoff_s)} if backoff_s is not None else {}),
           extra=extra, queue=queue, slurm=slurm, lock_fd=lock_fd)
    return [*warnings, *([note] if note else [])]


def launch_foreign_run(project: Path, name: str, exist_ok: bool, backend_name: str, opt: dict[str, Any],
                       argv: Sequence[str], extra: dict[str, Any], cwd: Path, device: str | None,
                       max_attempts: int, backoff_s: float | None) -> Path:
    """Make the run folder for another project's trainer (official, ultralytics) and start its backend's command
    under the supervisor; returns the folder. A folder that already holds a last.pt is refused (resume it); one
    made here is removed again when the launch is refused, so no half-made run is left behind."""
    from yolotui.placement.launcher import launch
    from yolotui.runs import store

    if exist_ok and (project / name / layout.WEIGHTS_DIR / layout.LAST_PT).exists():
        raise UserError(f"{project / name} already holds weights/last.pt: resume it with "
                        f"`yolotui resume {project / name}` or choose another --name")
    run_dir = store.create_run_dir(project, name, exist_ok=exist_ok)
    spec = get_backend(backend_name).new_run_command(CommandRequest(run_dir=run_dir, opt=opt, argv=tuple(argv)))
    kwargs: dict[str, Any] = {} if backoff_s is None else {"backoff_s": backoff_s}
    try:
        launch(run_dir, spec.command, name=run_dir.name, backend=backend_name, max_attempts=max_attempts,
               extra={**spec.extra, **extra}, cwd=cwd, device=device, **kwargs)
    except UserError:
        if not exist_ok:
            import shutil

            shutil.rmtree(run_dir, ignore_errors=True)  # nothing ran in it: leave no half-made run behind
        raise
    return run_dir
