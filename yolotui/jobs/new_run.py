"""New run: validate options, create the run folder with opt.yaml and hyp.yaml, start the trainer.

`prepare_run` does the folder (train, fine-tune and demo share it); `new_run` prepares and launches, and
removes the half-made folder again when the launch is refused.
"""

from __future__ import annotations

import math
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yolotui.backends import ENGINE
from yolotui.errors import UserError
from yolotui.jobs.launch import DEFAULT_MAX_ATTEMPTS, StartedRun, start_training, started, write_run_files
from yolotui.jobs.queue import QueueRequest, describe_spec, queue_spec, resolve_after
from yolotui.jobs.runextras import RunExtras


@dataclass
class NewRunRequest:
    """A new training run.

    `options`: training options under their dest names (config.TRAIN_DEFAULTS keys), only those given;
    `layout`: process-layout flags (nproc_per_node, nnodes, node_rank, rdzv_endpoint, rdzv_id, master_addr,
    master_port); `max_attempts`: attempts in all (see jobs.launch.restart_limit); `backoff_s`: seconds
    before the first retry (None: the supervisor's default); `queue`: what to wait for before starting;
    `slurm`: a yolotui.placement.slurm.SlurmOptions to submit the run as a SLURM job (None: run here);
    `extras`: notifications, stall timeout, logging.
    """

    options: dict[str, Any]
    layout: dict[str, Any] = field(default_factory=dict)
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    backoff_s: float | None = None
    backend: str = ENGINE
    queue: QueueRequest | None = None
    extras: RunExtras = field(default_factory=RunExtras)
    slurm: Any | None = None


@dataclass
class PreparedRun:
    """A run folder holding opt.yaml and hyp.yaml, not started yet."""

    run_dir: Path
    opt: dict[str, Any]
    hyp: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    lock_fd: int | None = None  # the run's lock, held since before opt.yaml was written; launch takes it over
    notes: list[str] = field(default_factory=list)  # facts worth a line, not problems (shipped configs used)


def check_weights_file(path: str | Path) -> list[str]:
    """Notes about a usable --weights file; UserError naming it when it is damaged or would run code.

    The scan is yolotui.health's pickle-opcode walk (nothing is unpickled). An official YOLOv9 checkpoint
    passes with a note: the trainer reads it with the same safe reader, which runs no code from the file.
    """
    from yolotui.health.checkpoint import OFFICIAL, inspect_checkpoint

    info = inspect_checkpoint(Path(path), verify_hash=False)
    if info.unsafe_globals:
        raise UserError(f"--weights {path}: refused: its pickle names {info.unsafe_globals[0]}, which would run "
                        "code if loaded; use a checkpoint from a trusted source")
    if info.error:
        raise UserError(f"--weights {path}: {info.error}; give a yolotui or YOLOv9 .pt checkpoint")
    if info.kind == OFFICIAL:
        return [f"--weights {path}: an official YOLOv9 checkpoint; its weights are read without running code "
                "from it, and transferred by name and shape"]
    return []


def prepare_run(options: dict[str, Any]) -> PreparedRun:
    """Validate options, create the run folder, write opt.yaml and hyp.yaml."""
    from yolotui.config import default_options, load_hyp, validate_options
    from yolotui.jobs.preflight import check_data, check_model
    from yolotui.runs import layout, lock, store

    notes: list[str] = []
    opt, warnings = validate_options(default_options(**options), notes=notes)
    if opt["weights"]:
        warnings += check_weights_file(opt["weights"])
    check_data(opt["data"])  # bad data or model files fail here, before anything detaches
    if opt["cfg"]:
        check_model(opt["cfg"])
    hyp = load_hyp(Path(opt["hyp"]))
    project = Path(str(opt["project"])).expanduser()
    store.validate_name(str(opt["name"]))
    if opt["exist_ok"] and (project / str(opt["name"]) / layout.WEIGHTS_DIR / layout.LAST_PT).exists():
        raise UserError(f"{project / str(opt['name'])} already holds weights/last.pt: resume it with "
                        f"`yolotui resume {shlex.quote(str(project / str(opt['name'])))}` or choose another --name")
    run_dir, lock_fd = store.claim_run_dir(project, str(opt["name"]), bool(opt["exist_ok"]), "yolotui train")
    try:
        opt["save_dir"] = str(run_dir)
        write_run_files(run_dir, opt, hyp)
    except BaseException:
        lock.release(lock_fd)
        raise
    return PreparedRun(run_dir, opt, hyp, warnings, lock_fd=lock_fd, notes=notes)


def launch_prepared(prepared: PreparedRun, request: NewRunRequest | None = None,
                    notes: list[str] | None = None, run_extra: dict[str, Any] | None = None) -> StartedRun:
    """Start a prepared run; its folder is removed again (unless --exist-ok) when the launch is refused.

    `run_extra`: the request's extras as run.yaml entries, checked before the folder was made."""
    from yolotui.runs import lock

    request = request or NewRunRequest(options={})
    lock_fd, prepared.lock_fd = prepared.lock_fd, None  # start_training owns it from here
    try:
        try:
            queue = queue_spec(request.queue, str(prepared.opt.get("device") or ""))
            run_extra = run_extra if run_extra is not None else request.extras.entries()
        except BaseException:
            lock.release(lock_fd)
            raise
        warnings = start_training(prepared.run_dir, prepared.opt, max_attempts=request.max_attempts,
                                  dist_flags=request.layout, backoff_s=request.backoff_s, backend=request.backend,
                                  queue=queue, slurm=request.slurm, run_extra=run_extra, lock_fd=lock_fd)
    except UserError:
        if not prepared.opt.get("exist_ok"):
            shutil.rmtree(prepared.run_dir, ignore_errors=True)  # nothing ran in it: leave no half-made run
        raise
    if queue:
        notes = [*(notes or []), describe_spec(queue)]
    return started(prepared.run_dir, "queued" if queue else "started", [*prepared.warnings, *warnings],
                   [*prepared.notes, *(notes or [])])


def new_run(request: NewRunRequest) -> StartedRun:
    """Prepare the run folder and start the trainer detached."""
    if request.backoff_s is not None and (not math.isfinite(request.backoff_s) or request.backoff_s < 0):
        raise UserError(f"--restart-backoff {request.backoff_s:g}: give a finite number of seconds, 0 or more")
    resolve_after(request.queue)  # an unknown --after RUN is refused before the folder is made
    run_extra = request.extras.entries()  # a bad --log-config is refused before any folder is made
    options, notes = with_recipe(request.options, request.backend)
    return launch_prepared(prepare_run(options), request, notes=notes, run_extra=run_extra)


def with_recipe(options: dict[str, Any], backend: str = ENGINE) -> tuple[dict[str, Any], list[str]]:
    """`options` with the hyperparameter recipe chosen for the run when --hyp is not given (engine runs only:
    the official backend keeps its own default), and the launch note that says which and why.

    The rule is yolotui.configs.recipe's: under 1000 optimizer steps at the nominal batch 64, the short-run
    recipe (its hyp file, and AdamW and close_mosaic where the options do not give them). UserError names data.yaml when its training images cannot be listed.
    """
    if options.get("hyp") or backend != ENGINE or not options.get("data"):
        return options, []
    from yolotui.config import TRAIN_DEFAULTS, resolve_data
    from yolotui.configs.recipe import choose_recipe
    from yolotui.datasets import list_images, load_data_yaml

    data = load_data_yaml(resolve_data(options["data"]))
    epochs = int(options.get("epochs") or TRAIN_DEFAULTS["epochs"])
    choice = choose_recipe(epochs, len(list_images(data.train)))
    chosen = {key: value for key, value in choice.opt_defaults.items() if options.get(key) is None}
    note = choice.reason
    if chosen:
        note += "; with " + ", ".join(f"{key} {value}" for key, value in chosen.items())
    return {**options, **chosen, "hyp": choice.hyp}, [note]
