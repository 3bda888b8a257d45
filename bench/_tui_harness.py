"""Shared by the TUI benchmarks: fixture runs, a pseudo-terminal launcher, and the child apps they time.

Run as a child: `python bench/_tui_harness.py MODE OUT_FILE [RUN_DIR]` with MODE `minimal` (a bare Textual
app), `home` (yolotui's runs table) or `attach` (a run's dashboard). The child writes `ready <unix time>`
when the first frame is on screen and `loaded <unix time>` when the runs table (or dashboard) is filled,
then exits (or, with LINGER=seconds in the environment, stays up that long first).
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))


def make_runs(root: Path, count: int) -> list[Path]:
    """`count` indexed fixture runs in assorted states (uses the test fixtures' writers)."""
    from tui_fixtures import make_run

    states = ("finished", "failed", "stopped", "running")
    return [make_run(root, f"run-{i:03d}", state=states[i % len(states)], epochs=30, done_epochs=5 + i % 20,
                     log_lines=5).path for i in range(count)]


def spawn_in_pty(argv: list[str], env: dict[str, str], cols: int = 120, rows: int = 40) -> subprocess.Popen:
    """Start `argv` on a new pseudo terminal of cols x rows and drain its output in a thread."""
    import fcntl
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = {**env, "TERM": "xterm-256color", "COLUMNS": str(cols), "LINES": str(rows)}
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True,
                            start_new_session=True)
    os.close(slave)

    def drain() -> None:
        while True:
            try:
                if not os.read(master, 65536):
                    break
            except OSError:
                break
        os.close(master)

    threading.Thread(target=drain, daemon=True).start()
    return proc


def child_env(home: Path) -> dict[str, str]:
    """The environment of a benchmarked TUI: this checkout, an isolated YOLOTUI_HOME."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO)
    env["YOLOTUI_HOME"] = str(home)
    return env


def read_marks(path: Path) -> dict[str, float]:
    """The `name time` lines a child wrote."""
    marks: dict[str, float] = {}
    try:
        for line in path.read_text().splitlines():
            name, value = line.split()
            marks[name] = float(value)
    except (OSError, ValueError):
        pass
    return marks


def _child(mode: str, out: Path, run_dir: str | None) -> None:
    linger = float(os.environ.get("LINGER", "0"))

    def mark(name: str) -> None:
        with open(out, "a") as handle:
            handle.write(f"{name} {time.time():.6f}\n")

    if mode == "minimal":
        from textual.app import App, ComposeResult
        from textual.widgets import Footer, Static

        class Minimal(App):
            def compose(self) -> ComposeResult:
                yield Static("hello")
                yield Footer()

            def on_ready(self) -> None:
                mark("ready")
                mark("loaded")
                self.set_timer(linger or 0.01, self.exit)

        Minimal().run()
        return

    from yolotui.tui.app import YolotuiApp

    class Timed(YolotuiApp):
        def on_ready(self) -> None:
            mark("ready")
            self._checker = self.set_interval(0.005, self._check)

        def _check(self) -> None:
            screen = self.screen
            # by name: importing the dashboard here would add its import to home's first frame, which never has it
            done = (screen.refresh_count > 0 if type(screen).__name__ == "DashboardScreen"
                    else self.home is not None and self.home.loaded)
            if done and not getattr(self, "_marked", False):
                self._marked = True
                self._checker.stop()  # measuring must not cost CPU afterwards
                self.call_after_refresh(lambda: mark("loaded"))
                self.set_timer(linger or 0.05, self.exit)

    if mode == "latency":
        from yolotui.tui.screens.dashboard import DashboardScreen

        original = DashboardScreen._render_view

        def render_and_mark(screen, view):
            original(screen, view)
            count = view.finished_epochs
            if count != getattr(screen, "_last_marked", None):
                screen._last_marked = count
                screen.call_after_refresh(lambda: mark(f"shown-{count}"))

        DashboardScreen._render_view = render_and_mark
        if os.environ.get("TRACE"):
            original_changed = DashboardScreen._on_files_changed

            def changed_and_mark(screen):
                mark(f"changed-{time.monotonic_ns()}")
                original_changed(screen)

            DashboardScreen._on_files_changed = changed_and_mark
    if os.environ.get("TRACE_LAYOUT"):
        import collections
        import traceback

        from textual.widget import Widget

        counts: collections.Counter = collections.Counter()
        original_refresh = Widget.refresh

        def counting_refresh(self, *regions, **kwargs):
            if kwargs.get("layout"):
                frames = [f for f in traceback.extract_stack(limit=8)[:-1]]
                counts[(type(self).__name__, " < ".join(f"{Path(f.filename).name}:{f.lineno}"
                                                          for f in frames[-4:]))] += 1
            return original_refresh(self, *regions, **kwargs)

        Widget.refresh = counting_refresh
        from textual.screen import Screen

        original_bindings = Screen.refresh_bindings

        def counting_bindings(self):
            frames = traceback.extract_stack(limit=7)[:-1]
            counts[("bindings", " < ".join(f"{Path(f.filename).name}:{f.lineno}" for f in frames[-5:]))] += 1
            return original_bindings(self)

        Screen.refresh_bindings = counting_bindings
        original_render_lines = Widget.render_lines

        def counting_render_lines(self, crop):
            counts[("render_lines", f"{type(self).__name__}#{self.id} h={crop.height}")] += 1
            return original_render_lines(self, crop)

        Widget.render_lines = counting_render_lines
        import atexit

        atexit.register(lambda: Path(os.environ["TRACE_LAYOUT"]).write_text(
            "\n".join(f"{n} {k}" for k, n in counts.most_common(30))))
    app = Timed(run_dir=Path(run_dir) if run_dir else None,
                gpu_interval=None if os.environ.get("GPU_OFF") else 1.0)
    import signal

    signal.signal(signal.SIGTERM, lambda *_: app.exit())  # a clean exit, so profiles and traces are written
    if os.environ.get("PROFILE"):  # the main thread only: rendering, messages, the event loop
        import cProfile

        profile = cProfile.Profile()
        profile.runcall(app.run)
        profile.dump_stats(os.environ["PROFILE"])
    else:
        app.run()


if __name__ == "__main__":
    _child(sys.argv[1], Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
