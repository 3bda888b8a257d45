"""CLI side of starting a run: say where it lives and how it survives logout, then optionally follow it.

The starting itself is yolotui.jobs (new_run, resume, finetune).
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

from yolotui.commands._options import report_started


def after_launch(result: Any, attach: bool, as_json: bool = False, show_command: bool = False) -> int:
    """Report a jobs.results.StartedRun; follow it in plain text when `attach`. `show_command` (resume): say
    the command the supervisor runs, and a hook command the run's own run.yaml adds, word for word."""
    from yolotui.formatting import printable

    report_started(result, as_json)
    out = sys.stderr if as_json else sys.stdout
    run_dir = Path(result.run_dir)
    verb = "resuming" if result.verb in ("resumed", "extending") else result.verb
    print(f"{verb} run {printable(run_dir.name)}: {printable(run_dir)}", file=out)
    if show_command and getattr(result, "command", None):
        print(f"  runs: {printable(shlex.join(result.command))}", file=out)
    if show_command and getattr(result, "notify_command", None):
        print(f"  and, on each notification, the hook command from its run.yaml: "
              f"{printable(result.notify_command)}", file=out)
    from yolotui.placement.logout import launch_lines_for

    for line in launch_lines_for(run_dir):  # how it survives logout
        print(line, file=out)
    if attach:
        from yolotui.commands._progress import follow

        follow(run_dir)
    else:
        print(f"follow it with: yolotui attach {shlex.quote(str(run_dir))}    stop it with: yolotui stop {shlex.quote(str(run_dir))}", file=out)
    return 0


def ask_on_terminal(text: str) -> bool:
    """Show `text` and ask for a `y` on the terminal; False without one (stdin or stderr not a terminal)."""
    import sys

    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return False
    print(text, file=sys.stderr)
    print("run it? [y/N] ", end="", file=sys.stderr, flush=True)  # stderr: stdout may be a pipe (--json)
    answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")
