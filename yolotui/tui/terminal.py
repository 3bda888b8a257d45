"""Only Textual draws on the TUI's terminal, at the terminal's real size: every other write goes to the TUI's log.

A byte that reaches the terminal from anywhere but Textual's driver (a child process that inherited the
terminal, a C library writing to fd 2, a logging handler made before the app started, a warning) moves the
cursor or scrolls the screen under the app, and the dashboard is drawn shifted until the next full repaint.
`guarded_terminal()` (what `run_app` runs the app in) therefore, for each of stdout and stderr that is a
terminal:

- keeps the terminal on a private, non-inheritable copy of the descriptor and points `sys.__stdout__` /
  `sys.__stderr__` (what Textual's driver and the terminal size read) and `sys.stdout` / `sys.stderr` at it;
- points descriptors 1 and 2 at the log file, so children and C-level writes land in the log;
- sends Python warnings, logging's last-resort handler and uncaught thread exceptions to the log (inside the
  app Textual captures `sys.stdout`/`sys.stderr` and drops what they print);
- takes COLUMNS and LINES out of the environment: Textual (through shutil.get_terminal_size) would take them
  over the terminal's real size, and a stale value (exported by a shell, or set by a parent: GNU readline
  writes the size of *its* terminal there) draws the dashboard taller than the screen, which scrolls it just
  like a stray newline.

On the way out everything is put back, so the farewell line and error messages reach the terminal. Where
neither stream is a terminal (`yolotui serve` talks to its browser over stdout) nothing is changed. The
children that must draw on the terminal (a pager; another host's dashboard or wizard over `ssh -t`) take
`terminal_streams()` explicitly (the app's `run_in_terminal`). The log is rotated when
the TUI starts (see MAX_LOG_BYTES), not while it runs.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import traceback
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

LOG_NAME = "tui.log"
MAX_LOG_BYTES = 2 * 1024 * 1024  # past this at start the log is moved to tui.log.1 (one old copy kept)
SIZE_VARIABLES = ("COLUMNS", "LINES")


def log_path() -> Path:
    """The TUI's log file: `tui.log` in yolotui's state folder ($YOLOTUI_HOME when set)."""
    from yolotui.runs.index import home_dir

    return home_dir() / LOG_NAME


def open_log(path: Path) -> IO[str]:
    """`path` opened for appending (mode 0600, rotated past MAX_LOG_BYTES); /dev/null if it cannot be."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with suppress(OSError):
            if path.stat().st_size > MAX_LOG_BYTES:
                os.replace(path, path.with_name(path.name + ".1"))
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError:
        fd = os.open(os.devnull, os.O_WRONLY)
    return open(fd, "a", encoding="utf-8", errors="backslashreplace", buffering=1)  # noqa: SIM115 - closed by the guard


def terminal_streams() -> tuple[Any, Any]:
    """(stdout, stderr) of the real terminal, for the children that must draw on it (a pager, `ssh -t`)."""
    return sys.__stdout__, sys.__stderr__


class _Guard:
    """What `guarded_terminal` changed, to put it back."""

    def __init__(self, log: IO[str]) -> None:
        self.log = log
        self.saved: list[tuple[int, int, str, Any, Any]] = []  # (fd, its terminal copy, name, stream, dunder)
        self.showwarning = warnings.showwarning
        self.last_resort = logging.lastResort
        self.excepthook = threading.excepthook
        self.size_variables: dict[str, str] = {}

    def drop_size_variables(self) -> None:
        """COLUMNS and LINES out of the environment (also the C one children get), for the app's lifetime."""
        self.size_variables = {key: os.environ.pop(key) for key in SIZE_VARIABLES if key in os.environ}

    def divert(self, fd: int, name: str) -> None:
        """Keep the terminal of descriptor `fd` (1 or 2) for Textual; point `fd` itself at the log."""
        stream, dunder = getattr(sys, name), getattr(sys, f"__{name}__")
        with suppress(AttributeError, ValueError, OSError):
            stream.flush()
        copy = os.dup(fd)  # not inheritable: no child ever gets the terminal through it
        template = dunder if dunder is not None else stream
        terminal = open(copy, "w", encoding=getattr(template, "encoding", None) or "utf-8",  # noqa: SIM115
                        errors=getattr(template, "errors", None) or "strict", closefd=False, buffering=1)
        os.dup2(self.log.fileno(), fd)
        self.saved.append((fd, copy, name, stream, dunder))
        setattr(sys, name, terminal)
        setattr(sys, f"__{name}__", terminal)

    def route_python_writes(self) -> None:
        """Warnings, logging's last resort and thread crashes to the log."""
        log = self.log

        def showwarning(message, category, filename, lineno, file=None, line=None) -> None:
            with suppress(OSError, ValueError):
                log.write(warnings.formatwarning(message, category, filename, lineno, line))

        def excepthook(args: threading.ExceptHookArgs) -> None:
            with suppress(OSError, ValueError):
                where = args.thread.name if args.thread is not None else "a thread"
                log.write(f"uncaught exception in {where}:\n"
                          + "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback)))

        handler = logging.StreamHandler(log)
        handler.setLevel(logging.WARNING)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        warnings.showwarning = showwarning
        logging.lastResort = handler
        threading.excepthook = excepthook

    def restore(self) -> None:
        """Put the terminal back on descriptors 1 and 2 and the Python streams and hooks back as they were."""
        warnings.showwarning = self.showwarning
        logging.lastResort = self.last_resort
        threading.excepthook = self.excepthook
        os.environ.update(self.size_variables)
        for fd, copy, name, stream, dunder in reversed(self.saved):
            terminal = getattr(sys, f"__{name}__")
            with suppress(AttributeError, ValueError, OSError):
                terminal.flush()
            with suppress(AttributeError, ValueError, OSError):
                stream.flush()  # what went to the log through fd meanwhile
            os.dup2(copy, fd)
            os.close(copy)
            setattr(sys, name, stream)
            setattr(sys, f"__{name}__", dunder)
        self.saved.clear()
        with suppress(OSError):
            self.log.close()


def _is_terminal(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


@contextmanager
def guarded_terminal(path: Path | None = None) -> Iterator[Path | None]:
    """Run the block with the terminal kept for Textual and every other write sent to the log at `path`
    (default `log_path()`); yields the log's path, or None where stdout and stderr are not terminals."""
    diverted = [(fd, name) for fd, name in ((1, "stdout"), (2, "stderr")) if _is_terminal(fd)]
    if not diverted:
        yield None
        return
    path = path or log_path()
    guard = _Guard(open_log(path))
    try:
        for fd, name in diverted:
            guard.divert(fd, name)
        guard.route_python_writes()
        guard.drop_size_variables()
    except OSError:  # out of descriptors, say: the app still runs, unguarded
        guard.restore()
        yield None
        return
    try:
        yield path
    finally:
        guard.restore()
