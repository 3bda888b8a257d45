"""The command lines the wizards run, and running them: every TUI action is a `yolotui ...` CLI call.

A wizard shows `format_command(args)` (so users learn the CLI) and launches by running
`cli_argv(args)` = `[sys.executable, "-m", "yolotui", *args]`, never through a shell; commands that start
a run get `--json` added, so the TUI learns the run it started from JSON (yolotui.jobs.launch), never
from human text. The CLI commands detach the run under its supervisor and return at once, so a launch
takes about a second. Torch-free: this module imports only the standard library.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent  # the folder holding the yolotui package
DEFAULT_PROJECT = "runs/train"
LAUNCH_TIMEOUT_S = 120.0
JSON_COMMANDS = frozenset({"train", "resume", "finetune", "demo", "exec"})  # they take --json


@dataclass
class CliResult:
    """How a `yolotui ...` call ended: exit status and what it printed."""

    args: list[str]
    returncode: int
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        """True when the command exited 0."""
        return self.returncode == 0

    @property
    def started(self) -> dict[str, Any] | None:
        """The run a --json command started ({'name', 'folder', 'state', 'verb', ...}), None if none."""
        for line in reversed(self.stdout.splitlines()):
            line = line.strip()
            if line.startswith("{"):
                try:
                    data = json.loads(line)
                except ValueError:
                    continue
                if isinstance(data, dict) and data.get("folder"):
                    return data
        return None

    @property
    def message(self) -> str:
        """The line worth showing: the last error line on failure, else the started run or first output line."""
        if not self.ok:
            lines = [line for line in self.stderr.splitlines() if line.strip()] or \
                [line for line in self.stdout.splitlines() if line.strip()]
            text = lines[-1] if lines else f"exit status {self.returncode}"
            return text.removeprefix("yolotui: error: ")
        run = self.started
        if run is not None:
            verb = "resuming" if run.get("verb") in ("resumed", "extending") else run.get("verb") or "started"
            return f"{verb} run {run.get('name')}: {run['folder']}"
        lines = [line for line in self.stdout.splitlines() if line.strip()]
        return lines[0] if lines else "done"


Launcher = Callable[[list[str]], CliResult]


def cli_argv(args: Sequence[str]) -> list[str]:
    """The argv that runs `yolotui ARGS` with this interpreter and this copy of yolotui."""
    return [sys.executable, "-m", "yolotui", *args]


def format_command(args: Sequence[str]) -> str:
    """The command line as a user would type it: `yolotui train --cfg ...`, shell-quoted."""
    return shlex.join(["yolotui", *[str(a) for a in args]])


def cli_env() -> dict[str, str]:
    """Environment for the CLI subprocess: this copy of yolotui first on PYTHONPATH (it may not be installed)."""
    env = dict(os.environ)
    parts = [str(PACKAGE_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    return env


def with_json(args: Sequence[str]) -> list[str]:
    """ARGS plus `--json` when the command starts a run (so its answer is read as JSON)."""
    args = [str(a) for a in args]
    if args and args[0] in JSON_COMMANDS and "--json" not in args:
        if "--" in args:  # `yolotui exec ... -- COMMAND`: yolotui's own flags end at `--`
            cut = args.index("--")
            return [*args[:cut], "--json", *args[cut:]]
        return [*args, "--json"]
    return args


def run_cli(args: Sequence[str], timeout: float = LAUNCH_TIMEOUT_S) -> CliResult:
    """Run `yolotui ARGS` to its end (no shell, stdin closed); a timeout or a missing interpreter is a result.

    Commands that start a run are given `--json` (see `CliResult.started`). The child never touches the TUI's
    terminal: its output is captured and it runs in a session of its own, without a controlling terminal."""
    args = [str(a) for a in args]
    try:
        done = subprocess.run(cli_argv(with_json(args)), env=cli_env(), stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=timeout, check=False, start_new_session=True)
    except subprocess.TimeoutExpired:
        return CliResult(args, 124, "", f"`{format_command(args)}` did not return within {timeout:g} s")
    except OSError as exc:
        return CliResult(args, 127, "", f"could not run {sys.executable}: {exc}")
    return CliResult(args, done.returncode, done.stdout, done.stderr)


def display_path(path: str | Path) -> str:
    """A path as short as it can be shown: relative to the working folder when inside it."""
    path = Path(path)
    if not path.is_absolute():
        return str(path)
    try:
        relative = path.relative_to(Path.cwd())
    except ValueError:
        return str(path)
    return str(relative) if str(relative) != "." else str(path)


# -------------------------------------------------------------------------------------- command lines

def train_args(cfg: str, data: str, epochs: int, batch_size: int, imgsz: int, device: str, hyp: str = "",
               name: str = "", project: str = DEFAULT_PROJECT, workers: int | None = None,
               after: str = "", when_free: str | None = None, slurm: list[str] | None = None) -> list[str]:
    """`yolotui train` arguments with the official flag names (defaults left out).

    `after` queues the run behind another (--after RUN); `when_free` ('' for idle GPUs, or '20G') queues it
    until the GPUs are free (--when-free [MEM]); None starts it at once. `slurm` (a list of sbatch options,
    maybe empty) submits it as a SLURM job.
    """
    args = ["train", "--cfg", cfg, "--data", data, "--epochs", str(epochs), "--batch-size", str(batch_size),
            "--img", str(imgsz), "--device", device]
    if workers is not None:
        args += ["--workers", str(workers)]
    if hyp:
        args += ["--hyp", hyp]
    if project and project != DEFAULT_PROJECT:
        args += ["--project", project]
    if name:
        args += ["--name", name]
    if after:
        args += ["--after", after]
    if when_free is not None:
        args += ["--when-free", *([when_free] if when_free else [])]
    if slurm is not None:
        args += ["--slurm", *[f"--sbatch-arg={option}" for option in slurm]]
    return args


def resume_args(run: str, epochs: int | None = None, batch_size: int | None = None,
                from_ckpt: str | None = None) -> list[str]:
    """`yolotui resume RUN [--epochs N] [--batch-size B] [--from CKPT]`."""
    args = ["resume", run]
    if epochs is not None:
        args += ["--epochs", str(epochs)]
    if batch_size is not None:
        args += ["--batch-size", str(batch_size)]
    if from_ckpt:
        args += ["--from", from_ckpt]
    return args


def finetune_args(source: str, data: str, freeze: str, epochs: int, lr_scale: float, name: str = "",
                  project: str | None = None) -> list[str]:
    """`yolotui finetune --from SRC --data D --freeze F --epochs N --lr-scale S [--name N]`."""
    args = ["finetune", "--from", source, "--data", data, "--freeze", freeze, "--epochs", str(epochs),
            "--lr-scale", f"{lr_scale:g}"]
    if project:
        args += ["--project", project]
    if name:
        args += ["--name", name]
    return args


def stop_args(run: str, force: bool = False, grace_s: float | None = None) -> list[str]:
    """`yolotui stop RUN --no-wait [--force] [--grace S]` (the TUI follows the stop itself)."""
    args = ["stop", run]
    if force:
        args.append("--force")
    elif grace_s is not None:
        args += ["--grace", f"{grace_s:g}"]
    return args + ["--no-wait"]


def save_args(run: str) -> list[str]:
    """`yolotui save RUN`: a checkpoint now."""
    return ["save", run]


def launched_run_dir(result: CliResult) -> Path | None:
    """The run folder a train/resume/finetune call started (from its --json answer), if any."""
    run = result.started if result.ok else None
    return Path(run["folder"]) if run else None


def pager_argv(path: Path, environ: dict[str, str] | None = None) -> list[str]:
    """`$PAGER FILE` split into argv (no shell); `less -R +G` when PAGER is unset (starts at the end)."""
    environ = os.environ if environ is None else environ
    pager = environ.get("PAGER", "").strip()
    argv = shlex.split(pager) if pager else ["less", "-R", "+G"]
    return [*argv, str(path)]
