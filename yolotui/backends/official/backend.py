"""The `official` backend: a checkout of the official YOLOv9 repository (train_dual.py, train.py,
train_triple.py), run under yolotui's supervisor through the stdlib shim (yolotui/backends/official/shim.py).

- Launch: `yolotui train --backend official --repo PATH [train_dual.py flags]`, or `yolotui exec -- python
  train_dual.py ...` (recognised by `recognise_command`). The trainer's interpreter is `--python EXE` (default:
  the `python` of the exec command, else this one). The run folder is PROJECT/NAME (the train_dual.py flags
  --project/--name/--exist-ok, numbered as yolotui and the official code both do); the shim is told to write
  there (`--project PARENT --name NAME --exist-ok`), so the official save_dir IS the run folder: results.csv,
  opt.yaml, hyp.yaml and weights/ land where every yolotui reader looks.
- run.yaml records `backend: official` and `official: {repo, script, python, save_dir, args}`, plus
  `resume_args: [--resume, RUN/weights/last.pt]`, `resume_if_usable: RUN/weights/last.pt`; the supervisor asks this backend
  (`resume_usable`) before it adds them: every retry, `yolotui resume RUN`, `resume --interrupted` and the resume wizard add `--resume
  last.pt` when that file is a resumable checkpoint (yolotui's scan), and rerun the original command otherwise.
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
YOLOTUI_FLAGS = {"--backend": 1, "--repo": 1, "--script": 1, "--python": 1, "--attach": 0, "--json": 0,
                 "--max-restarts": 1, "--max-attempts": 1, "--restart-backoff": 1,
                 "--notify": 1, "--stall-timeout": 1, "--log-config": 1, "--log-level": 1, "--mirror": 1,
                 "--preempt-url": 1}
OUTPUT_FLAGS = {"--project": 1, "--name": 1, "--exist-ok": 0}
OFFICIAL_DEFAULT_PROJECT = "runs/train"
OFFICIAL_DEFAULT_NAME = "exp"
OPT_ORIG = "opt.yaml.orig"  # yolotui/backends/official/opt_edit.py
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
    return Path(__file__).with_name("shim.py")


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


# ------------------------------------------------------------------------------------------ run folders

def save_dir(run_dir: Path) -> Path:
    """Where the official trainer of this run writes: run.yaml's official.save_dir, else the run folder."""
    from yolotui.runs.runconfig import run_yaml_field

    official = run_yaml_field(Path(run_dir), "official")
    recorded = official.get("save_dir") if isinstance(official, dict) else None
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
    from yolotui.backends.official.opt_edit import edit_opt_yaml as edit

    return edit(save_dir(run_dir) / layout.OPT_YAML, changes)


def python_for(explicit: str | None, recognised: OfficialCommand | None = None) -> str:
    """The trainer's interpreter: --python, else the exec command's python, else this interpreter."""
    if explicit:
        return explicit
    if recognised is not None:
        return recognised.python
    return sys.executable


def resume_usable(run_config: dict[str, Any]) -> bool:
    """Whether run.yaml's `resume_if_usable` checkpoint is resumable by yolotui's scan (the doctor's verdict),
    against the plan in opt.yaml beside it (what the official --resume reads). The supervisor calls this through
    the backend (Backend.resume_usable) before adding `--resume RUN/weights/last.pt` (yolotui/supervisor/policy.py)."""
    from yolotui.health.verdict import RESUMABLE, diagnose_checkpoint

    path = run_config.get("resume_if_usable")
    if not path:
        return True
    path = Path(str(path))
    opt = read_opt(path.parent.parent) if (path.parent.parent / layout.OPT_YAML).exists() else {}
    try:
        total = int(opt.get("epochs")) if opt.get("epochs") is not None else None
    except (TypeError, ValueError):
        total = None
    return diagnose_checkpoint(path, total_epochs=total, find_fallback=False).verdict == RESUMABLE
