"""The `official` backend: a checkout of the official YOLOv9 repository (train_dual.py, train.py,
train_triple.py), run under yolotui's supervisor through the stdlib shim (yolotui/backends/official_shim.py).

- Launch: `yolotui train --backend official --repo PATH [train_dual.py flags]`, or `yolotui exec -- python
  train_dual.py ...` (recognised by `recognise_command`). The trainer's interpreter is `--python EXE` (default:
  the `python` of the exec command, else this one). The run folder is PROJECT/NAME (the train_dual.py flags
  --project/--name/--exist-ok, numbered as yolotui and the official code both do); the shim is told to write
  there (`--project PARENT --name NAME --exist-ok`), so the official save_dir IS the run folder: results.csv,
  opt.yaml, hyp.yaml and weights/ land where every yolotui reader looks.
- run.yaml records `backend: official` and `official: {repo, script, python, save_dir, args}`, plus
  `resume_args: [--resume, RUN/weights/last.pt]` and `resume_if_usable: RUN/weights/last.pt`: every retry,
  `yolotui resume RUN`, `resume --interrupted` and the resume wizard add `--resume last.pt` when that file is
  a resumable checkpoint (yolotui's scan), and rerun the original command otherwise (yolotui/runs/policy.py).
- Resume semantics are the official ones: the official `--resume` reads RUN/opt.yaml, so changes for a resumed
  attempt (the OOM remedy's batch, `resume --epochs N` extending a finished run) are written there, with the
  first version kept as opt.yaml.orig (`edit_opt_yaml`).
- What it cannot do: no SIGUSR1 handler (no save-now), a stop loses the partial epoch (the official trainer
  saves only at epoch ends), no learning-rate scale (the nan remedy resumes at the same lr), no multi-GPU
  launch from yolotui (run torchrun yourself under `yolotui exec`).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yolotui.errors import UserError
from yolotui.runs import layout

NAME = "official"
SCRIPTS = ("train_dual.py", "train.py", "train_triple.py")
# yolotui's own flags of `yolotui train --backend official` (value count); the rest go to the official script.
YOLOTUI_FLAGS = {"--backend": 1, "--repo": 1, "--python": 1, "--attach": 0, "--max-restarts": 1,
                 "--max-attempts": 1, "--restart-backoff": 1}
OUTPUT_FLAGS = {"--project": 1, "--name": 1, "--exist-ok": 0}
OFFICIAL_DEFAULT_PROJECT = "runs/train"
OFFICIAL_DEFAULT_NAME = "exp"
OPT_ORIG = "opt.yaml.orig"  # yolotui/runs/opt_edit.py
CANNOT = {
    "save_now": "the official trainer has no save-now signal (SIGUSR1 would kill it): it writes last.pt at the "
                "end of every epoch",
    "mid_epoch_stop": "stopping the official trainer loses the epoch in progress: it resumes from the last "
                      "epoch's last.pt",
    "lr_scale": "the official trainer has no learning-rate scale: a nan resume restarts at the same lr",
}
_PYTHON_NAME = re.compile(r"^python(\d+(\.\d+)?)?$")


@dataclass
class OfficialCommand:
    """An official training command: the interpreter, the checkout, the script and its flags."""

    python: str
    repo: Path
    script: str = "train_dual.py"
    args: list[str] = field(default_factory=list)


def shim_path() -> Path:
    """The shim file, launched by path with the trainer's interpreter."""
    return Path(__file__).with_name("official_shim.py")


def is_official_repo(path: Path) -> bool:
    """True when `path` looks like a checkout of the official repository (utils/callbacks.py and a script)."""
    path = Path(path)
    return (path / "utils" / "callbacks.py").is_file() and any((path / s).is_file() for s in SCRIPTS)


def find_repo(repo: str | Path | None, cwd: Path | None = None) -> Path:
    """The official checkout: `repo`, or the current folder when it holds train_dual.py; UserError otherwise."""
    cwd = Path(cwd or Path.cwd())
    if repo is None:
        if is_official_repo(cwd):
            return cwd.resolve()
        raise UserError(f"{cwd} is not a checkout of the official YOLOv9 repository (no train_dual.py and "
                        "utils/callbacks.py): give --repo PATH")
    path = Path(repo).expanduser()
    path = path if path.is_absolute() else cwd / path
    if not path.is_dir():
        raise UserError(f"--repo {repo}: no such folder; give the folder of your official YOLOv9 checkout")
    if not is_official_repo(path):
        raise UserError(f"--repo {repo}: not a checkout of the official YOLOv9 repository (needs train_dual.py "
                        "and utils/callbacks.py)")
    return path.resolve()


def split_flags(argv: list[str], table: dict[str, int]) -> tuple[dict[str, Any], list[str]]:
    """Take the flags of `table` (flag -> number of values) out of `argv`: ({flag: value or True}, the rest)."""
    taken: dict[str, Any] = {}
    rest: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        flag, _, inline = token.partition("=")
        if flag in table:
            if table[flag] == 0:
                taken[flag] = True
                i += 1
                continue
            if inline:
                taken[flag] = inline
                i += 1
                continue
            if i + 1 >= len(argv):
                raise UserError(f"{flag} needs a value")
            taken[flag] = argv[i + 1]
            i += 2
            continue
        rest.append(token)
        i += 1
    return taken, rest


def recognise_command(argv: list[str], cwd: Path | None = None) -> OfficialCommand | None:
    """The official command in `argv` (`python [-u] path/train_dual.py ...` or `path/train_dual.py ...`), or None.

    The script's folder must be an official checkout (utils/callbacks.py beside it).
    """
    cwd = Path(cwd or Path.cwd())
    if not argv:
        return None
    python, rest = sys.executable, list(argv)
    if _PYTHON_NAME.match(Path(argv[0]).name):
        python, rest = argv[0], list(argv[1:])
        while rest and rest[0].startswith("-") and rest[0] != "-m":
            rest = rest[2:] if rest[0] in ("-W", "-X") else rest[1:]
    if not rest or Path(rest[0]).name not in SCRIPTS:
        return None
    script = Path(rest[0]).expanduser()
    script = script if script.is_absolute() else cwd / script
    if not script.is_file() or not is_official_repo(script.parent):
        return None
    return OfficialCommand(python=python, repo=script.parent.resolve(), script=script.name, args=rest[1:])


def output_folder(args: list[str], cwd: Path | None = None) -> tuple[Path, str, bool, list[str]]:
    """(project, name, exist_ok, the args without them) from the official flags; official defaults otherwise."""
    taken, rest = split_flags(list(args), OUTPUT_FLAGS)
    project = Path(str(taken.get("--project") or OFFICIAL_DEFAULT_PROJECT)).expanduser()
    if not project.is_absolute():
        project = Path(cwd or Path.cwd()) / project
    return project, str(taken.get("--name") or OFFICIAL_DEFAULT_NAME), bool(taken.get("--exist-ok")), rest


def trainer_command(cmd: OfficialCommand, run_dir: Path, args: list[str]) -> list[str]:
    """The supervised argv: the shim in the trainer's interpreter, writing into `run_dir`."""
    run_dir = Path(run_dir)
    return [cmd.python, str(shim_path()), "--repo", str(cmd.repo), "--script", cmd.script, "--run-dir",
            str(run_dir), "--", *args, "--project", str(run_dir.parent), "--name", run_dir.name, "--exist-ok"]


def resume_settings(run_dir: Path) -> dict[str, Any]:
    """run.yaml's resume entries: `--resume RUN/weights/last.pt` when that checkpoint is resumable."""
    last = layout.weights_dir(Path(run_dir)) / layout.LAST_PT
    return {"resume_args": ["--resume", str(last)], "resume_if_usable": str(last)}


def check_interpreter(python: str) -> list[str]:
    """Lines to print at launch about the trainer's interpreter (bounded probe); UserError if it cannot run."""
    from yolotui.health.official_env import official_env_issues, probe_interpreter

    facts = probe_interpreter(python)
    if facts.get("error"):
        raise UserError(f"--python: {facts['error']}; give the interpreter that runs the official code")
    lines = [f"trainer: {facts.get('executable') or python} (Python {facts.get('python')}, torch "
             f"{facts.get('torch') or 'missing'}, numpy {facts.get('numpy') or '?'}, Pillow {facts.get('pillow') or '?'})"]
    lines += [f"{issue.level}: {issue.message}" for issue in official_env_issues(facts)]
    if facts.get("torch") and not any("weights_only" in line for line in lines):
        lines.append(f"note: torch {facts['torch']} unpickles fully by default: the official loads work as they are")
    return lines


def launch_official(cmd: OfficialCommand, *, cwd: Path | None = None, max_attempts: int = 5,
                    backoff_s: float | None = None, project: Path | None = None, name: str | None = None,
                    exist_ok: bool | None = None) -> tuple[Path, list[str]]:
    """Create the run folder and start the official trainer under the supervisor; (run_dir, lines to print).

    project/name/exist_ok given here win over the official flags in `cmd.args` (which win over the defaults).
    """
    from yolotui.runs import store
    from yolotui.runs.launcher import launch

    cwd = Path(cwd or Path.cwd()).resolve()
    script = cmd.repo / cmd.script
    if not script.is_file():
        raise UserError(f"{script} not found: the official checkout has no {cmd.script}")
    flag_project, flag_name, flag_exist_ok, args = output_folder(cmd.args, cwd)
    if any(a == "--resume" or a.startswith("--resume=") for a in args):
        raise UserError("--resume: resume a yolotui run with `yolotui resume RUN` (it passes the official "
                        "--resume RUN/weights/last.pt itself)")
    project = Path(project) if project is not None else flag_project
    name = name or flag_name
    exist_ok = flag_exist_ok if exist_ok is None else exist_ok
    store.validate_name(name)
    lines = check_interpreter(cmd.python)
    if exist_ok and (project / name / layout.WEIGHTS_DIR / layout.LAST_PT).exists():
        raise UserError(f"{project / name} already holds weights/last.pt: resume it with "
                        f"`yolotui resume {project / name}` or choose another --name")
    run_dir = store.create_run_dir(project, name, exist_ok=exist_ok)
    extra = {"official": {"repo": str(cmd.repo), "script": cmd.script, "python": cmd.python,
                          "save_dir": str(run_dir), "args": list(args)},
             **resume_settings(run_dir)}
    kwargs: dict[str, Any] = {}
    if backoff_s is not None:
        kwargs["backoff_s"] = backoff_s
    try:
        launch(run_dir, trainer_command(cmd, run_dir, args), name=run_dir.name, backend=NAME,
               max_attempts=max_attempts, extra=extra, cwd=cwd, **kwargs)
    except UserError:
        if not exist_ok:
            import shutil

            shutil.rmtree(run_dir, ignore_errors=True)
        raise
    return run_dir, lines


# ------------------------------------------------------------------------------------------ run folders

def is_official_run(run_dir: Path) -> bool:
    """True when run.yaml says backend official."""
    config = _run_config(run_dir)
    return bool(config) and config.get("backend") == NAME


def _run_config(run_dir: Path) -> dict[str, Any]:
    from yolotui.runs.runconfig import read_run_config

    try:
        return read_run_config(Path(run_dir))
    except UserError:
        return {}


def save_dir(run_dir: Path) -> Path:
    """Where the official trainer of this run writes: run.yaml's official.save_dir, else the run folder."""
    config = _run_config(run_dir)
    recorded = (config.get("official") or {}).get("save_dir") if isinstance(config.get("official"), dict) else None
    return Path(recorded) if recorded else Path(run_dir)


def read_opt(run_dir: Path) -> dict[str, Any]:
    """The official opt.yaml of the run (bounded, safe YAML); {} when missing."""
    from yolotui.config import load_yaml

    path = save_dir(run_dir) / layout.OPT_YAML
    if not path.exists():
        return {}
    return load_yaml(path, "opt.yaml")


def edit_opt_yaml(run_dir: Path, changes: dict[str, Any]) -> dict[str, list[Any]]:
    """Write `changes` into the run's opt.yaml (what the official --resume reads), keeping the first version as
    opt.yaml.orig; returns {key: [was, now]}."""
    from yolotui.runs.opt_edit import edit_opt_yaml as edit

    return edit(save_dir(run_dir) / layout.OPT_YAML, changes)


def resume_official(run_dir: Path, epochs: int | None = None, batch_size: int | None = None,
                    device: str | None = None, workers: int | None = None) -> tuple[str, list[str]]:
    """Relaunch an official run with the official `--resume RUN/weights/last.pt` (options changed in opt.yaml).

    Returns (verb, lines to print). A finished, unstripped run extends to `epochs`; a stripped one (epoch -1)
    cannot: fine-tune it instead. With no usable last.pt the original command starts the run over.
    """
    from yolotui.health.verdict import FINISHED, RESUMABLE, diagnose_checkpoint
    from yolotui.runs import lock
    from yolotui.runs.launcher import launch
    from yolotui.runs.policy import restart_settings
    from yolotui.runs.runconfig import RESERVED_KEYS, read_run_config

    run_dir = Path(run_dir)
    if lock.is_held(run_dir):
        raise UserError(f"run {run_dir} is still live: stop it first (yolotui stop {run_dir.name})")
    config = read_run_config(run_dir)
    opt = read_opt(run_dir)
    planned = int(opt.get("epochs") or 0) or None
    last = layout.weights_dir(save_dir(run_dir)) / layout.LAST_PT
    verdict = diagnose_checkpoint(last, total_epochs=planned, find_fallback=False)
    lines: list[str] = []
    changes: dict[str, Any] = {}
    verb = "resuming"
    if verdict.verdict == FINISHED:
        if verdict.epoch is None or (verdict.info is not None and verdict.info.epoch == -1):
            raise UserError(f"{last} is stripped (the official strip_optimizer ran: epoch -1, no optimizer), so "
                            "the official trainer cannot extend it; fine-tune it instead: yolotui finetune "
                            f"{run_dir} --epochs N")
        if epochs is None or epochs <= verdict.epoch:
            raise UserError(f"run {run_dir.name} finished all {verdict.epoch} epochs: extend it with --epochs N "
                            f"(N > {verdict.epoch})")
        verb = "extending"
        lines.append(f"extending from epoch {verdict.epoch} to {epochs}: the official trainer re-plans its lr "
                     f"schedule for {epochs} epochs from the current epoch on")
    elif verdict.verdict == RESUMABLE:
        if epochs is not None and verdict.epoch is not None and epochs <= verdict.epoch:
            raise UserError(f"--epochs {epochs}: the run has already done {verdict.epoch} epochs; give at least "
                            f"{verdict.epoch + 1}")
        lines.append(f"resuming from epoch {verdict.epoch} of {epochs or planned} with the official --resume {last}")
    else:
        why = "; ".join(verdict.reasons) or verdict.verdict
        lines.append(f"no usable last.pt ({verdict.verdict}: {why}): starting the original command over in "
                     f"{run_dir}")
        verb = "restarting"
    for key, value in (("epochs", epochs), ("batch_size", batch_size), ("device", device), ("workers", workers)):
        if value is not None:
            changes[key] = value
    if changes:
        settings = edit_opt_yaml(run_dir, changes)
        if settings:
            lines.append("opt.yaml: " + ", ".join(f"{k} {a} -> {b}" for k, (a, b) in settings.items())
                         + f" (the first version is kept as {OPT_ORIG})")
    max_attempts, backoff_s, _ = restart_settings(config)
    extra = {k: v for k, v in config.items() if k not in RESERVED_KEYS and k != "logout"}
    extra.update(resume_settings(save_dir(run_dir)))
    extra["resume_first"] = True
    restart = {k: v for k, v in (config.get("restart") or {}).items() if k not in ("max_attempts", "backoff_s")}
    launch(run_dir, [str(a) for a in config["command"]], name=str(config.get("name") or run_dir.name),
           backend=NAME, device=config.get("device"), max_attempts=max_attempts,
           env={str(k): str(v) for k, v in (config.get("env") or {}).items()}, extra=extra, backoff_s=backoff_s,
           cwd=Path(config["cwd"]) if config.get("cwd") else None, restart=restart)
    return verb, lines


def python_for(explicit: str | None, recognised: OfficialCommand | None = None) -> str:
    """The trainer's interpreter: --python, else the exec command's python, else this interpreter."""
    if explicit:
        return explicit
    if recognised is not None:
        return recognised.python
    return sys.executable
