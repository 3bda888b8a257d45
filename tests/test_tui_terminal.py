"""guarded_terminal on a real pseudo-terminal (no tmux needed): only what is written to the kept terminal
reaches it; descriptors 1 and 2, children, warnings and logging's last resort go to the log; a stale COLUMNS/LINES
does not override the terminal's size; everything is put back afterwards."""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import sys
import termios
import textwrap
from pathlib import Path

from yolotui.tui.terminal import MAX_LOG_BYTES, guarded_terminal, open_log

REPO_ROOT = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent(r'''
    import logging, os, shutil, subprocess, sys, warnings
    from pathlib import Path
    from yolotui.tui.terminal import guarded_terminal, terminal_streams

    with guarded_terminal(Path(sys.argv[1])) as log:
        size = shutil.get_terminal_size()
        sys.__stdout__.write(f"kept: size {size.columns}x{size.lines}, log {log is not None}\n")
        sys.__stdout__.flush()
        print("python print while guarded", flush=True)
        os.write(1, b"fd one\n")
        os.write(2, b"fd two\n")
        warnings.warn("a library warning")
        logging.getLogger("some.library").warning("a library record")
        subprocess.run([sys.executable, "-c", "import sys; print('child out'); print('child err', file=sys.stderr)"])
        out, err = terminal_streams()
        subprocess.run([sys.executable, "-c", "print('pager out')"], stdout=out, stderr=err)
    print(f"after: LINES={os.environ.get('LINES')} COLUMNS={os.environ.get('COLUMNS')}", flush=True)
    os.write(2, b"fd two after\n")
''')


def _run_on_pty(tmp_path: Path, env: dict[str, str]) -> tuple[str, str]:
    """Run SCRIPT with a 100x30 pseudo-terminal as stdout and stderr; (what the terminal got, the log)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    log = tmp_path / "tui.log"
    try:
        child = subprocess.Popen([sys.executable, "-c", SCRIPT, str(log)], stdin=subprocess.DEVNULL, stdout=slave,
                                 stderr=slave, env=env, close_fds=True)
    finally:
        os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer of the terminal is gone
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert child.wait(timeout=60) == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode(errors="replace").replace("\r\n", "\n"), log.read_text()


def test_only_the_kept_terminal_reaches_the_screen(tmp_path, cli_env):
    env = {**cli_env, "LINES": "45", "COLUMNS": "130"}  # a stale size, bigger than the terminal
    screen, log = _run_on_pty(tmp_path, env)
    assert "kept: size 100x30, log True" in screen
    assert "pager out" in screen
    for text in ("fd one", "fd two\n", "child out", "child err", "a library warning", "a library record"):
        assert text not in screen, f"{text!r} reached the terminal:\n{screen}"
        assert text in log, f"{text!r} is not in the log:\n{log}"
    # sys.stdout is the kept terminal (Textual replaces it while the app runs; before and after, a crash report
    # must reach the user)
    assert "python print while guarded" in screen
    assert "after: LINES=45 COLUMNS=130" in screen  # put back on the way out
    assert "fd two after" in screen


def test_nothing_changes_where_stdout_and_stderr_are_not_terminals(tmp_path):
    before = (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)
    with guarded_terminal(tmp_path / "tui.log") as log:
        assert log is None
        assert (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__) == before
    assert not (tmp_path / "tui.log").exists()


def test_the_log_is_private_and_bounded(tmp_path):
    path = tmp_path / "tui.log"
    path.write_bytes(b"x" * (MAX_LOG_BYTES + 1))
    with open_log(path) as handle:
        handle.write("new\n")
    assert path.read_text() == "new\n" and (tmp_path / "tui.log.1").stat().st_size == MAX_LOG_BYTES + 1
    assert path.stat().st_mode & 0o777 == 0o600
    unwritable = tmp_path / "file" / "tui.log"
    (tmp_path / "file").write_text("not a folder")
    with open_log(unwritable) as handle:  # the app still runs: the log is /dev/null
        handle.write("lost\n")
