"""Commands of the ultralytics backend: the supervised argv, the run folder, resume and extend.

- The trainer is always the shim (yolotui/backends/ultralytics/shim.py) run BY PATH with the user's
  interpreter (the one that has ultralytics; `--python EXE`, or the `#!` line of `yolo`), so progress, atomic
  checkpoints and the ultralytics resume work whatever yolotui's own environment holds.
- The run folder is PROJECT/NAME from the ultralytics `project=`/`name=`/`exist_ok=` arguments (defaults
  runs/<task> and train, numbered train2, train3 ... as ultralytics does), made relative to the working folder;
  the shim is told to write there (`project=PARENT name=NAME exist_ok=True`, and the trainer's save_dir is
  forced to it for scripts), so ultralytics' save_dir IS the run folder and run.yaml records it.
- Resume: run.yaml's `resume_args` are `--yolotui-resume SAVE_DIR/weights/last.pt` (plus the changed batch,
  workers or device), added by the supervisor only when that checkpoint is resumable (Backend.resume_usable).
- Extend: ultralytics resumes to the epochs stored in the checkpoint's train_args and refuses one that is done,
  so `extend_checkpoint` rewrites them in a subprocess of the trainer's interpreter (torch is never imported
  here), keeping the first version as last.pt.orig.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from yolotui.backends.ultralytics.recognise import CLI, UltralyticsCommand, parse_overrides
from yolotui.errors import UserError

NAME = "ultralytics"
OUTPUT_KEYS = ("project", "name", "exist_ok")
RESUME_FLAG = "--yolotui-resume"
BATCH_FLAG = "--yolotui-batch"
WORKERS_FLAG = "--yolotui-workers"
DEVICE_FLAG = "--yolotui-device"
LAST_ORIG = "last.pt.orig"
UNSTRIPPED = "last.unstripped.pt"  # the shim's hard link of the final last.pt, before ultralytics strips it
PROBE_TIMEOUT_S = 20.0
REWRITE_TIMEOUT_S = 300.0


def shim_path() -> Path:
    """The shim file, launched by path with the trainer's interpreter."""
    return Path(__file__).with_name("shim.py")


def _truthy(text: str | None) -> bool:
    return str(text or "").strip().lower() in ("1", "true", "yes", "on")


def output_folder(cmd: UltralyticsCommand, cwd: Path | None = None) -> tuple[Path, str, bool]:
    """(project, name, exist_ok) of the command's ultralytics arguments; ultralytics' defaults otherwise."""
    given = cmd.overrides()
    project = Path(given.get("project") or f"runs/{cmd.task}").expanduser()
    if not project.is_absolute():
        project = Path(cwd or Path.cwd()) / project
    return project, given.get("name") or "train", _truthy(given.get("exist_ok"))


def without_keys(args: list[str], keys: tuple[str, ...]) -> list[str]:
    """`args` without the `key=value` arguments of `keys`."""
    return [a for a in args if (a[2:] if a.startswith("--") else a).partition("=")[0].strip() not in keys]


def trainer_command(cmd: UltralyticsCommand, run_dir: Path) -> list[str]:
    """The supervised argv: the shim in the trainer's interpreter, writing into `run_dir`."""
    run_dir = Path(run_dir)
    head = [cmd.python, str(shim_path()), "--yolotui-run-dir", str(run_dir), "--yolotui-mode", cmd.mode, "--"]
    if cmd.mode == CLI:
        return [*head, *without_keys(cmd.args, OUTPUT_KEYS), f"project={run_dir.parent}", f"name={run_dir.name}",
                "exist_ok=True"]
    return [*head, str(cmd.script), *cmd.args]


def last_pt(save_dir: Path) -> Path:
    """SAVE_DIR/weights/last.pt, what ultralytics resumes from."""
    return Path(save_dir) / "weights" / "last.pt"


def resume_settings(save_dir: Path, batch: int | None = None, workers: int | None = None,
                    device: str | None = None) -> dict[str, Any]:
    """run.yaml's resume entries: the shim's ultralytics resume from last.pt, when that checkpoint is resumable;
    `batch_flag` tells the OOM remedy which flag carries the batch."""
    args = [RESUME_FLAG, str(last_pt(save_dir))]
    for flag, value in ((BATCH_FLAG, batch), (WORKERS_FLAG, workers), (DEVICE_FLAG, device)):
        if value is not None:
            args += [flag, str(value)]
    return {"resume_args": args, "resume_if_usable": str(last_pt(save_dir)),  "batch_flag": BATCH_FLAG}


def refuse_own_resume(cmd: UltralyticsCommand) -> None:
    """UserError for a new run whose ultralytics arguments ask for resume (yolotui resume does that)."""
    if cmd.mode == CLI and ("resume" in cmd.args or parse_overrides(cmd.args).get("resume") not in (None, "False",
                                                                                                   "false")):
        raise UserError("resume=...: resume a yolotui run with `yolotui resume RUN` (it runs ultralytics' resume "
                        "from the run's weights/last.pt itself)")


# ------------------------------------------------------------------------------ the trainer's interpreter

def _run_shim(python: str, args: list[str], timeout: float) -> dict[str, Any]:
    """Run the shim with `args` in `python`; its last JSON line, or {'error': ...}."""
    from yolotui.health.subprocess_json import run_for_json

    return run_for_json([python, str(shim_path()), *args], timeout)


def probe_interpreter(python: str) -> dict[str, Any]:
    """Python, torch and ultralytics versions in `python` (package metadata, bounded); {'error'} when it fails."""
    return _run_shim(python, ["--yolotui-probe"], PROBE_TIMEOUT_S)


def interpreter_lines(python: str) -> list[str]:
    """Lines about the trainer's interpreter; UserError when it cannot run ultralytics at all."""
    facts = probe_interpreter(python)
    if facts.get("error"):
        raise UserError(f"--python: {facts['error']}; give the interpreter that has ultralytics")
    if not facts.get("ultralytics"):
        raise UserError(f"ultralytics is not installed in {facts.get('executable') or python}: install it there "
                        "(pip install ultralytics) or give --python the interpreter that has it")
    if not facts.get("torch"):
        raise UserError(f"torch is not installed in {facts.get('executable') or python}: ultralytics needs it")
    return [f"trainer: {facts.get('executable') or python} (Python {facts.get('python')}, ultralytics "
            f"{facts.get('ultralytics')}, torch {facts.get('torch')}); ultralytics is AGPL-3.0: yolotui runs it only "
            "as this separate process"]


def rewrite_epochs(python: str, source: Path, output: Path, epochs: int) -> dict[str, Any]:
    """Write `source` with its train_args epochs set to `epochs` to `output`, in a subprocess of `python`
    (the shim, atomically); the shim's JSON answer. UserError when it fails."""
    answer = _run_shim(python, ["--yolotui-rewrite-epochs", str(int(epochs)), "--yolotui-checkpoint", str(source),
                                "--yolotui-output", str(output)], REWRITE_TIMEOUT_S)
    if answer.get("error"):
        raise UserError(f"cannot set the epochs of {source} to {epochs}: {answer['error']}")
    return answer


def extend_checkpoint(python: str, weights: Path, source: Path, epochs: int) -> list[str]:
    """Make weights/last.pt a copy of `source` planned for `epochs` (the first last.pt kept as last.pt.orig);
    returns the lines that say what changed."""
    import shutil

    weights = Path(weights)
    last, orig = weights / "last.pt", weights / LAST_ORIG
    notes = []
    if last.exists() and not orig.exists():
        tmp = orig.with_name(orig.name + ".tmp")
        shutil.copyfile(last, tmp)
        tmp.replace(orig)
        notes.append(f"kept the previous last.pt as {orig}")
    answer = rewrite_epochs(python, source, last, epochs)
    notes.insert(0, f"rewrote the checkpoint's train_args epochs {answer.get('epochs_was')} -> {epochs} in {last}"
                    + (f" (from {source.name})" if Path(source).name != "last.pt" else "")
                    + ": ultralytics resumes to the epochs stored there and ignores a new epochs= argument")
    return notes


def read_args_yaml(save_dir: Path) -> dict[str, Any]:
    """ultralytics' args.yaml of a run (bounded, safe YAML); {} when missing or unreadable."""
    from yolotui import safe_yaml

    path = Path(save_dir) / "args.yaml"
    try:
        data = safe_yaml.load_file(path)
    except Exception:  # a missing or damaged args.yaml only loses the defaults it would give
        return {}
    return data if isinstance(data, dict) else {}


def shim_answer_text(answer: dict[str, Any]) -> str:
    """One line for a shim JSON answer (logs, errors)."""
    return json.dumps(answer, sort_keys=True)


def save_dir(run_dir: Path) -> Path:
    """Where ultralytics writes for this run: run.yaml's ultralytics.save_dir, else the run folder."""
    from yolotui.runs.runconfig import run_yaml_field

    recorded = run_yaml_field(Path(run_dir), NAME)
    folder = recorded.get("save_dir") if isinstance(recorded, dict) else None
    return Path(folder) if folder else Path(run_dir)
