"""CLI side of starting a run: print where it lives and how it survives logout, then optionally follow it.

The starting itself is yolotui.jobs.launch.
"""

from __future__ import annotations

from pathlib import Path


def after_launch(run_dir: Path, attach: bool, verb: str = "started") -> int:
    """Print where the run lives; follow it in plain text when `attach`."""
    print(f"{verb} run {Path(run_dir).name}: {run_dir}")
    from yolotui.runs.logout import launch_lines_for

    for line in launch_lines_for(run_dir):  # how it survives logout (issue 7)
        print(line)
    if attach:
        from yolotui.commands._progress import follow

        follow(Path(run_dir))
    else:
        print(f"follow it with: yolotui attach {run_dir}    stop it with: yolotui stop {run_dir}")
    return 0


def start_training_printing(*args, **kwargs) -> None:
    """yolotui.jobs.launch.start_training, its warnings printed."""
    from yolotui.jobs.launch import start_training

    for warning in start_training(*args, **kwargs):
        print(f"warning: {warning}")
