"""End to end in a real terminal: a supervised run, the TUI in tmux, an 'SSH drop' (tmux server killed),
and a fresh TUI that reattaches and reads the epoch advancing from capture-pane."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time

import pytest
from syspkg import needs

from yolotui.runs import lock
from yolotui.runs.status import read_status

pytestmark = [pytest.mark.tmux, needs("tmux")]

TRAINER = textwrap.dedent('''
    """A stand-in trainer: a batch event every 0.25 s, an epoch (event + results row) every 0.5 s."""
    import os, sys, time
    from pathlib import Path
    from yolotui.runs.events import EventWriter
    from yolotui.runs.results import append_row
    run = Path(os.environ["YOLOTUI_RUN_DIR"])
    writer = EventWriter(run / "events.jsonl", attempt=1)
    epochs = 400
    writer.emit("start", world_size=1, devices=["cpu"], resumed_from=None)
    for epoch in range(epochs):
        for batch in (1, 2):  # batches done, as the trainer counts them
            writer.emit("batch", epoch=epoch, epochs=epochs, batch=batch, batches=2,
                        losses={"box": 1.0, "cls": 1.0, "dfl": 1.0}, lr=0.01, imgs_per_s=64.0, gpu_mem_gb=0.0)
            time.sleep(0.25)
        loss = 3.0 / (1 + epoch)
        writer.emit("epoch", epoch=epoch, epochs=epochs, losses={"box": loss, "cls": loss, "dfl": loss},
                    metrics={"P": 0.5, "R": 0.5, "mAP50": 0.4, "mAP50-95": 0.2}, fitness=0.2, seconds=0.5)
        append_row(run / "results.csv", epoch, [loss, loss, loss, 0.5, 0.5, 0.4, 0.2, loss, loss, loss,
                                                0.01, 0.01, 0.01])
        print(f"epoch {epoch} done", flush=True)
''')


class Tmux:
    """A private tmux server (its own -L socket), so the test never touches the user's sessions."""

    def __init__(self, socket: str) -> None:
        self.socket = socket

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", *args], capture_output=True,
                              text=True, timeout=20, check=check)

    def start(self, command: list[str], env: dict[str, str]) -> None:
        env_args = [arg for key in ("PYTHONPATH", "YOLOTUI_HOME") for arg in ("-e", f"{key}={env[key]}")]
        self.run("new-session", "-d", "-x", "100", "-y", "30", "-s", "tui", *env_args, *command)

    def screen(self) -> str:
        result = self.run("capture-pane", "-p", "-t", "tui", check=False)
        return result.stdout

    def kill_server(self) -> None:
        self.run("kill-server", check=False)


def finished_epochs(screen: str) -> int | None:
    """The finished-epoch count on a fully drawn dashboard, else None.

    "Drawn" means the header (run name and state) and the overall progress line are both on the screen, and
    the count is read twice in a row the same (a screen caught mid-repaint is not read).
    """
    if "e2e" not in screen or "running" not in screen:
        return None
    match = re.search(r"overall\s+(\d+)/400\b", screen)
    return int(match.group(1)) if match else None


def wait_for_epoch(tmux: Tmux, above: int, timeout: float = 180.0) -> tuple[int, str]:
    """Poll the pane until a drawn dashboard shows more than `above` finished epochs.

    The timeout is only a safety net for a TUI that never draws (under load, starting Python and Textual can
    take tens of seconds); the test waits on the condition, never on a fixed time.
    """
    deadline = time.monotonic() + timeout
    screen = ""
    previous: int | None = None
    while time.monotonic() < deadline:
        screen = tmux.screen()
        epochs = finished_epochs(screen)
        if epochs is not None and epochs > above and epochs == previous:
            return epochs, screen
        previous = epochs
        time.sleep(0.3)
    raise AssertionError(f"epoch never went above {above}; screen was:\n{screen}")


def wait_until_gone(tmux: Tmux, timeout: float = 30.0) -> None:
    """Wait until the private tmux server is really gone (its session no longer answers)."""
    deadline = time.monotonic() + timeout
    while tmux.run("has-session", "-t", "tui", check=False).returncode == 0:
        assert time.monotonic() < deadline, "tmux server did not go away"
        time.sleep(0.1)


def test_tui_reattaches_after_the_terminal_dies(tmp_path, cli_env, yolotui_cmd):
    trainer = tmp_path / "fake_trainer.py"
    trainer.write_text(TRAINER)
    started = subprocess.run([*yolotui_cmd, "exec", "--name", "e2e", "--project", str(tmp_path / "runs"), "--",
                              sys.executable, str(trainer)], env=cli_env, capture_output=True, text=True,
                             timeout=60)
    assert started.returncode == 0, started.stderr
    run_dir = tmp_path / "runs" / "e2e"
    tmux = Tmux(f"yolotui-test-{os.getpid()}")
    tui = [sys.executable, "-m", "yolotui", "attach", "e2e"]
    try:
        tmux.start(tui, cli_env)
        first, _ = wait_for_epoch(tmux, above=0)
        tmux.kill_server()  # the SSH connection drops: terminal and TUI die together
        wait_until_gone(tmux)
        assert lock.is_held(run_dir), "the run outlived its terminal"
        tmux.start(tui, cli_env)  # a new login, a new TUI
        again, screen = wait_for_epoch(tmux, above=first)
        assert "e2e" in screen and "running" in screen
        later, _ = wait_for_epoch(tmux, above=again)
        assert later > again > first
    finally:
        tmux.kill_server()
        subprocess.run([*yolotui_cmd, "stop", str(run_dir)], env=cli_env, capture_output=True, timeout=60)
        deadline = time.monotonic() + 20
        while lock.is_held(run_dir) and time.monotonic() < deadline:
            time.sleep(0.2)
        if lock.is_held(run_dir):  # last resort: the supervisor and trainer we started, by their own pids
            status = read_status(run_dir)
            for pid in (status.trainer_pid, status.supervisor_pid) if status else ():
                if pid:
                    try:
                        os.kill(pid, 9)
                    except OSError:
                        pass
    assert not lock.is_held(run_dir)
