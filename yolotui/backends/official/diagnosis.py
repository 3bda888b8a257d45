"""Doctor's view of a run of the official YOLOv9 trainer: where it writes, which interpreter runs it, what works.

A run yolotui started with the official backend records `official.save_dir` (the run folder itself) and
`official.python` in run.yaml. An older `yolotui exec -- python train_dual.py ...` run wrote wherever the official
code chose (runs/train/expN under its working folder): its folder is read from the "Logging results to X" line
of train.log. Keys the official trainer writes into opt.yaml itself, or that its `--resume` rewrites, are not
config drift (`DRIFT_IGNORED`); nor are the epochs/batch_size yolotui wrote for a resume when opt.yaml.orig
(the first version) is kept beside it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yolotui.backends.official.environment import official_env_issues, probe_interpreter

LOG_TAIL_BYTES = 512 * 1024
_LOGGING_TO = re.compile(r"Logging results to (?:\x1b\[[0-9;]*m)*([^\x1b\n]+)")
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
SCRIPTS = ("train_dual.py", "train.py", "train_triple.py")
# cfg and weights: the official --resume reinstates them ('' and last.pt); label_smoothing: added by the trainer
DRIFT_IGNORED = frozenset({"cfg", "weights", "label_smoothing"})
RESUME_EDITED = frozenset({"epochs", "batch_size", "device", "workers"})


@dataclass
class OfficialRun:
    """Facts about an official run: its output folder, the trainer's interpreter, environment findings."""

    folder: Path
    python: str | None
    env_lines: list[str] = field(default_factory=list)

    def advice(self, recommended: str, run_dir: Path, stripped: bool) -> str:
        """The official command to suggest for doctor's recommendation (see official_advice)."""
        return official_advice(recommended, run_dir, stripped)

    def drift_ignored(self) -> frozenset[str]:
        """opt.yaml keys that are not drift for this run."""
        edited = RESUME_EDITED if (self.folder / "opt.yaml.orig").exists() else frozenset()
        return DRIFT_IGNORED | edited


def _load_run_yaml(run_dir: Path) -> dict[str, Any]:
    """The run.yaml fields this module reads, through the one lenient run.yaml reader."""
    from yolotui.runs.runconfig import run_yaml_field

    return {key: run_yaml_field(run_dir, key) for key in ("backend", "command", "official", "cwd")}


def _uses_official_script(command: list[Any]) -> bool:
    return any(Path(str(part)).name in SCRIPTS for part in command[:4])


def _logged_folder(run_dir: Path, cwd: str | None) -> Path | None:
    try:
        with open(Path(run_dir) / "train.log", "rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - LOG_TAIL_BYTES))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    found = _LOGGING_TO.findall(text)
    if not found:
        return None
    folder = Path(found[-1].strip())
    return folder if folder.is_absolute() else Path(cwd or run_dir) / folder


def official_run(run_dir: Path, probe: bool = True) -> OfficialRun | None:
    """The official-run facts of `run_dir`, or None when it is not a run of the official trainer."""
    config = _load_run_yaml(run_dir)
    command = config.get("command") if isinstance(config.get("command"), list) else []
    official = config.get("official") if isinstance(config.get("official"), dict) else None
    if config.get("backend") != "official" and not _uses_official_script(command):
        return None
    folder = Path(official["save_dir"]) if official and official.get("save_dir") else \
        _logged_folder(run_dir, config.get("cwd")) or Path(run_dir)
    python = (official or {}).get("python") or (str(command[0]) if command and _PYTHON.match(
        Path(str(command[0])).name) else None)
    facts = OfficialRun(folder=folder, python=python)
    if probe and python:
        for issue in official_env_issues(probe_interpreter(python)):
            facts.env_lines.append(f"{issue.level}: {issue.message}")
    return facts


def official_advice(recommended: str, run_dir: Path, stripped: bool) -> str:
    """A command that works for the official trainer, for doctor's recommendation."""
    name = Path(run_dir).name
    if recommended == "resume":
        return f"yolotui resume {name}  (the official --resume {name}/weights/last.pt)"
    if recommended == "extend-or-finetune" and not stripped:
        return (f"extend: yolotui resume {name} --epochs N; or fine-tune: yolotui finetune --backend official "
                f"--from {name} --data NEW.yaml")
    if recommended in ("extend-or-finetune", "finetune", "resume-from-fallback"):
        return f"fine-tune: yolotui finetune --backend official --from {name} --data NEW.yaml"
    if recommended == "restart":
        return f"yolotui resume {name}  (no usable last.pt: it reruns the original command)"
    return ""
