"""End to end in a real terminal: a supervised run, the TUI in tmux, an 'SSH drop' (tmux server killed),
and a fresh TUI that reattaches and reads the epoch advancing from capture-pane; and a dashboard that stays whole
while its own process, a child and a CLI action write to stdout and stderr (only Textual draws on the terminal).
A failed wait says why: the pane, the run's status and the ends of train.log, supervisor.log and tui.log."""

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
from yolotui.runs.status import effective_state, read_status

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


NOISY_TUI = textwrap.dedent(r'''
    """`yolotui attach e2e`, plus noise from inside the TUI's own process once the file GO exists: a library's
    warning and log record, prints, C-level writes to descriptors 1 and 2, and a child that inherits them; each
    writes more lines than the screen has, so that on the terminal it would scroll the dashboard."""
    import logging, os, subprocess, sys, threading, time, warnings
    from pathlib import Path
    from yolotui.cli import main

    GO, DONE = Path(sys.argv[1]), Path(sys.argv[2])
    CHILD = ("import sys; print('noise: child stdout\\n' * 40, end=''); "
             "print('noise: child stderr\\n' * 40, end='', file=sys.stderr)")

    def noise():
        while not GO.exists():
            time.sleep(0.05)
        warnings.warn("noise: a library's warning")
        logging.getLogger("noisy.library").warning("noise: a library's log record")
        print("noise: a stray print\n" * 40, end="", flush=True)
        print("noise: a stray print to stderr\n" * 40, end="", file=sys.stderr, flush=True)
        os.write(1, b"noise: fd 1\n" * 40)
        os.write(2, b"noise: fd 2\n" * 40)
        subprocess.run([sys.executable, "-c", CHILD], timeout=60)
        DONE.write_text("made noise")

    threading.Thread(target=noise, daemon=True).start()
    sys.exit(main(["attach", "e2e"]))
''')

PANE_ROWS = 30
HEADER = re.compile(r"^\s*e2e\s+running\b")  # the dashboard's first line: run name and state
PANELS = ("train loss", "val metrics", "gpu", "checkpoints", "train.log")


class Tmux:
    """A private tmux server (its own -L socket), so the test never touches the user's sessions.

    Its commands get this process's environment explicitly, without COLUMNS/LINES: pytest imports readline,
    and GNU readline puts the size of pytest's own terminal into the C environment, which a child started
    with the default environment (the tmux server, and through it the TUI) would inherit."""

    def __init__(self, socket: str) -> None:
        self.socket = socket

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
        return subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", *args], capture_output=True,
                              text=True, timeout=20, check=check, env=env)

    def start(self, command: list[str], env: dict[str, str], **extra: str) -> None:
        """Run `command` in a 100x30 pane with `env`'s PYTHONPATH and YOLOTUI_HOME and the variables `extra`;
        a pane whose command exits stays, showing its last words."""
        pairs = {"PYTHONPATH": env["PYTHONPATH"], "YOLOTUI_HOME": env["YOLOTUI_HOME"], **extra}
        env_args = [arg for key, value in pairs.items() for arg in ("-e", f"{key}={value}")]
        self.run("start-server", ";", "set-option", "-g", "remain-on-exit", "on", ";",
                 "new-session", "-d", "-x", "100", "-y", str(PANE_ROWS), "-s", "tui", *env_args, *command)

    def screen(self) -> str:
        result = self.run("capture-pane", "-p", "-t", "tui", check=False)
        return result.stdout

    def kill_server(self) -> None:
        self.run("kill-server", check=False)


def finished_epochs(screen: str) -> int | None:
    """The finished-epoch count on a drawn dashboard, else None.

    "Drawn" means the header (run name and state) is on the first line, where the dashboard puts it (a
    screen scrolled by a stray write has it elsewhere or not at all), and the overall progress line is there.
    """
    lines = screen.splitlines()
    if not lines or not HEADER.match(lines[0]):
        return None
    match = re.search(r"overall\s+(\d+)/400\b", screen)
    return int(match.group(1)) if match else None


def frame(screen: str) -> list[tuple[int, str]]:
    """The panels' top and bottom borders with their rows: they never change while the dashboard runs, so a
    write that scrolled the terminal under the app shows here until the next full repaint."""
    return [(row, line.rstrip()) for row, line in enumerate(screen.splitlines())
            if line.lstrip().startswith(("╭", "╰"))]


def missing_panels(screen: str) -> list[str]:
    """The dashboard's panels whose titled top border is not on the screen, and "footer" when the key bar is
    not on the pane's last row (the dashboard drawn for a screen of another height)."""
    missing = [title for title in PANELS if not re.search(rf"╭─ {re.escape(title)}\b", screen)]
    lines = screen.rstrip("\n").split("\n")
    if len(lines) != PANE_ROWS or "q Quit" not in lines[-1]:
        missing.append("footer")
    return missing


def _tail(path, limit: int = 3000) -> str:
    """The end of a file for a failure message, bounded; what is wrong with it if it cannot be read."""
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, os.path.getsize(path) - limit))
            return handle.read().decode(errors="replace")
    except OSError as exc:
        return f"({exc})"


def diagnosis(tmux: Tmux, run_dir, home) -> str:
    """What a failed wait needs to be understood: the pane now, the run's status, and the logs."""
    state = effective_state(run_dir)
    size = tmux.run("display-message", "-p", "-t", "tui", "#{pane_width}x#{pane_height}", check=False).stdout
    parts = [f"--- pane ({size.strip() or 'gone'}) now:\n{tmux.screen()}", f"--- run state: {state}",
             f"--- status.json:\n{_tail(run_dir / 'status.json')}"]
    for path in (run_dir / "train.log", run_dir / "supervisor.log", home / "tui.log"):
        parts.append(f"--- tail of {path}:\n{_tail(path)}")
    return "\n".join(parts)


def wait_for_epoch(tmux: Tmux, above: int, explain, timeout: float = 180.0) -> tuple[int, str]:
    """Poll the pane until a drawn dashboard shows more than `above` finished epochs; on failure the message
    ends with `explain()` (see `diagnosis`).

    The count must read the same twice in a row (a screen caught mid-repaint is not read). The timeout is only
    a safety net for a TUI that never draws (under load, starting Python and Textual can take tens of
    seconds); the test waits on the condition, never on a fixed time.
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
    raise AssertionError(f"no drawn dashboard (header on line 1) with more than {above} finished epochs within "
                         f"{timeout:g} s; screen was:\n{screen}\n{explain()}")


def wait_until_gone(tmux: Tmux, timeout: float = 30.0) -> None:
    """Wait until the private tmux server is really gone (its session no longer answers)."""
    deadline = time.monotonic() + timeout
    while tmux.run("has-session", "-t", "tui", check=False).returncode == 0:
        assert time.monotonic() < deadline, "tmux server did not go away"
        time.sleep(0.1)


def start_run(tmp_path, cli_env, yolotui_cmd, trainer_code: str = TRAINER):
    """`yolotui exec` the stand-in trainer as run e2e; its folder."""
    trainer = tmp_path / "fake_trainer.py"
    trainer.write_text(trainer_code)
    started = subprocess.run([*yolotui_cmd, "exec", "--name", "e2e", "--project", str(tmp_path / "runs"), "--",
                              sys.executable, str(trainer)], env=cli_env, capture_output=True, text=True,
                             timeout=60)
    assert started.returncode == 0, started.stderr
    return tmp_path / "runs" / "e2e"


def end_run(run_dir, cli_env, yolotui_cmd) -> None:
    """Stop the run; as a last resort kill its supervisor and trainer by their own pids."""
    subprocess.run([*yolotui_cmd, "stop", str(run_dir)], env=cli_env, capture_output=True, timeout=60)
    deadline = time.monotonic() + 20
    while lock.is_held(run_dir) and time.monotonic() < deadline:
        time.sleep(0.2)
    if lock.is_held(run_dir):
        status = read_status(run_dir)
        for pid in (status.trainer_pid, status.supervisor_pid) if status else ():
            if pid:
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass


def test_tui_reattaches_after_the_terminal_dies(tmp_path, cli_env, yolotui_cmd, yolotui_home):
    run_dir = start_run(tmp_path, cli_env, yolotui_cmd)
    tmux = Tmux(f"yolotui-test-{os.getpid()}")
    tui = [sys.executable, "-m", "yolotui", "attach", "e2e"]

    def explain() -> str:
        return diagnosis(tmux, run_dir, yolotui_home)

    try:
        tmux.start(tui, cli_env)
        first, _ = wait_for_epoch(tmux, above=0, explain=explain)
        tmux.kill_server()  # the SSH connection drops: terminal and TUI die together
        wait_until_gone(tmux)
        assert lock.is_held(run_dir), "the run outlived its terminal\n" + explain()
        tmux.start(tui, cli_env)  # a new login, a new TUI
        again, screen = wait_for_epoch(tmux, above=first, explain=explain)
        assert not missing_panels(screen), explain()
        later, _ = wait_for_epoch(tmux, above=again, explain=explain)
        assert later > again > first
    finally:
        tmux.kill_server()
        end_run(run_dir, cli_env, yolotui_cmd)
    assert not lock.is_held(run_dir)


def wait_until_intact(tmux: Tmux, before: list[tuple[int, str]], above: int, explain,
                      timeout: float = 90.0) -> str:
    """Poll the pane until the dashboard is whole again: header on line 1 and the epoch past `above` (it is
    live), every panel titled, the panels' borders on the rows they had in `before`, no noise on it.

    A toast (the checkpoint answer) covers a corner for a few seconds, hence a wait; a write that scrolled the
    terminal leaves the borders moved until a full repaint, which nothing in the test causes."""
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = tmux.screen()
        epochs = finished_epochs(screen)
        if (epochs is not None and epochs > above and not missing_panels(screen) and frame(screen) == before
                and "noise" not in screen):
            return screen
        time.sleep(0.3)
    shown = "\n".join(f"{row:2d} {line}" for row, line in before)
    raise AssertionError(f"the dashboard was not whole again within {timeout:g} s; its borders were:\n{shown}\n"
                         f"screen was:\n{screen}\n{explain()}")


def test_writes_from_the_tui_process_and_its_children_never_reach_the_screen(tmp_path, cli_env, yolotui_cmd,
                                                                            yolotui_home):
    run_dir = start_run(tmp_path, cli_env, yolotui_cmd)
    harness, go, done = tmp_path / "noisy_tui.py", tmp_path / "go", tmp_path / "done"
    harness.write_text(NOISY_TUI)
    tmux = Tmux(f"yolotui-test-{os.getpid()}-noise")

    def explain() -> str:
        return diagnosis(tmux, run_dir, yolotui_home)

    try:
        # a stale COLUMNS/LINES bigger than the pane (a shell's export, a parent's readline) must not count
        tmux.start([sys.executable, str(harness), str(go), str(done)], cli_env, COLUMNS="130", LINES="45")
        first, screen = wait_for_epoch(tmux, above=0, explain=explain)
        assert not missing_panels(screen), f"panels missing: {missing_panels(screen)}\n{explain()}"
        before = frame(screen)
        # "checkpoint now": an action whose CLI child (`yolotui save`) answers on stderr that this exec run
        # cannot; the TUI shows that answer as a toast
        tmux.run("send-keys", "-t", "tui", "c")
        go.touch()
        deadline = time.monotonic() + 60
        while not (done.exists() and "nothing sent" in tmux.screen()):
            assert time.monotonic() < deadline, "the noise or the checkpoint answer never came\n" + explain()
            time.sleep(0.2)
        wait_until_intact(tmux, before, above=first, explain=explain)
    finally:
        tmux.kill_server()
        end_run(run_dir, cli_env, yolotui_cmd)
    log = (yolotui_home / "tui.log").read_text(errors="replace")
    for text in ("noise: a library's warning", "noise: a library's log record", "noise: fd 1", "noise: fd 2",
                 "noise: child stdout", "noise: child stderr"):
        assert text in log, f"{text!r} is not in tui.log:\n{log[-3000:]}"
