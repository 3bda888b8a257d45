"""Entry point `yolotui`: a table of subcommands, each in its own module under `yolotui.commands`.

Only the chosen subcommand's module is imported, so `yolotui ls` stays fast; every module provides
`add_arguments(parser)` and `run(args) -> int`. With no subcommand the TUI opens on the home screen.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from yolotui import __version__
from yolotui.commands._remote import REMOTE_COMMANDS, add_host_flag, maybe_forward
from yolotui.errors import UserError

# name -> (module under yolotui.commands, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "tui": ("tui", "open the terminal UI (the default when no command is given)"),
    "attach": ("attach", "open a run's live dashboard"),
    "demo": ("demo", "generate demo data, start a short detached training run and follow it"),
    "train": ("train", "start YOLOv9 training, detached under the supervisor (train_dual.py flags)"),
    "resume": ("resume", "resume, or extend with --epochs, an interrupted or finished run"),
    "finetune": ("finetune", "start a new run initialised from another run's weights"),
    "val": ("val", "validate weights on a data set: P, R, mAP50, mAP50-95"),
    "exec": ("exec_cmd", "supervise any command as a detached run"),
    "ls": ("ls", "list runs"),
    "status": ("status", "show a run's status"),
    "logs": ("logs", "print a run's train.log"),
    "stop": ("stop", "stop a run gracefully (checkpoint, then exit)"),
    "save": ("save", "ask a running trainer to write a checkpoint now"),
    "rm": ("rm", "forget ended runs (--files also deletes their folders)"),
    "doctor": ("doctor", "diagnose a run or checkpoint before resuming"),
    "gpu": ("gpu", "GPU readings: temperature, memory, utilisation, power"),
    "check-data": ("check_data", "check a data set's images and labels"),
    "demo-data": ("demo_data", "generate the demo data set of coloured shapes"),
    "model-info": ("model_info", "layers, parameters and GFLOPs of a model config"),
    "compare": ("compare", "runs side by side: best/final metrics and the opt/hyp keys that differ"),
    "export": ("export", "write the deployable model (converted .pt, ONNX) and check it against the original"),
    "serve": ("serve", "serve the TUI to a browser (textual-serve), on localhost with a token"),
    "tensorboard": ("tensorboard", "TensorBoard on localhost over runs' event files (engine, official, save_dir)"),
    "service": ("service", "install a systemd user unit that resumes interrupted runs at boot"),
    "restore": ("restore_cmd", "bring a mirrored run (--mirror) to this machine, checked, ready to resume"),
    "notify": ("notify", "notifications: `yolotui notify test` sends a test message to every target"),
    "completion": ("completion", "print a shell completion script: yolotui completion bash|zsh|fish"),
    "hosts": ("hosts", "machines reached over ssh: `hosts add NAME [SSH_TARGET]`, `hosts ls`, `hosts rm NAME`"),
    "watch": ("watch", "follow a run as lines until it ends (--json: the fleet's live stream; HOST:RUN too)"),
}


def _load(command: str):
    module_name, _ = COMMANDS[command]
    return importlib.import_module(f"yolotui.commands.{module_name}")


def build_parser(selected: str | None) -> argparse.ArgumentParser:
    """The top-level parser; only `selected`'s arguments are filled in (all of them when None)."""
    parser = argparse.ArgumentParser(prog="yolotui", description="Train YOLOv9 over SSH, supervised and resumable.")
    parser.add_argument("--version", action="version", version=f"yolotui {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        if selected is None or name == selected:
            _load(name).add_arguments(sub_parser)
            if name in REMOTE_COMMANDS:
                add_host_flag(sub_parser)
    return parser


def _selected_command(argv: Sequence[str]) -> str | None:
    for token in argv:
        if token in COMMANDS:
            return token
        if not token.startswith("-"):
            return None
    return None


def refuse_non_finite(args: object) -> None:
    """UserError for NaN or infinity given to any float flag: a safety net under the use cases'
    own checks, so no float option of any command can carry them in."""
    import math

    for dest, value in vars(args).items():
        values = value if isinstance(value, list) else [value]
        for item in values:
            if isinstance(item, float) and not math.isfinite(item):
                raise UserError(f"--{dest.replace('_', '-')} {item}: give a finite number (not nan or inf)")


def _passes_unknown_args(argv: Sequence[str]) -> bool:
    """True when `yolotui train` is asked for a backend whose trainer takes the flags yolotui does not know
    (the official script's flags, ultralytics' key=value arguments: Backend.passes_unknown_args)."""
    for i, token in enumerate(argv):
        name = token.partition("=")[2] if token.startswith("--backend=") else (
            argv[i + 1] if token == "--backend" and i + 1 < len(argv) else None)
        if name:
            from yolotui.backends import get_backend

            try:
                return get_backend(name).passes_unknown_args
            except UserError:
                return False  # argparse names the valid choices
    return False


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv`, run the chosen subcommand, and turn UserError into a one-line message."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("--theme")):
        argv = ["tui", *argv]
    selected = _selected_command(argv)
    parser = build_parser(selected)
    if selected == "train" and _passes_unknown_args(argv):
        # the trainer's own flags pass through unchanged (its backend sorts them)
        args, _unknown = parser.parse_known_args(argv)
        args.raw_argv = argv[argv.index("train") + 1:]
    else:
        args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 0
    module = _load(args.command)
    args.full_parser = lambda: build_parser(None)  # for `completion`, which describes every command
    try:
        refuse_non_finite(args)
        forwarded = maybe_forward(args, argv)  # --host HOST or HOST:RUN: the same command on that host
        if forwarded is not None:
            return forwarded
        return int(module.run(args) or 0)
    except UserError as exc:
        print(f"yolotui: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `yolotui ls | head`: the reader left; silence the flush at exit too.
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
