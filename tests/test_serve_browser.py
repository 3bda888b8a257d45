"""`yolotui serve` in a real headless Chromium (system package) driven by Playwright.

The page loads, the runs table shows a run by name, Enter opens its dashboard. The terminal is drawn on a
canvas, so the test reads what the page's websocket received (the app's terminal output, ANSI stripped)
and waits for each expected text: a condition that means "drawn", never a fixed sleep.
Chromium comes from the system (`apt-get install chromium`, done by .ci/run); `playwright install` is never
used. Only a machine without that binary skips.
"""

from __future__ import annotations

import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest
from syspkg import needs
from tui_fixtures import make_run

from yolotui.errors import UserError
from yolotui.tui.web import check_bind, is_local_host, url_for

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ANSI = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Za-z0-9]|\x1b[=>]")


def test_bind_rules():
    assert is_local_host("127.0.0.1") and is_local_host("::1") and is_local_host("localhost")
    assert not is_local_host("0.0.0.0") and not is_local_host("192.168.1.4")
    check_bind("127.0.0.1", None, False)
    check_bind("0.0.0.0", "my-own-token", False)
    check_bind("0.0.0.0", None, True)
    with pytest.raises(UserError, match="ssh -L"):
        check_bind("0.0.0.0", None, False)
    assert url_for("::1", 8000, "t") == "http://[::1]:8000/?token=t"


def test_cli_refuses_a_public_host_without_a_flag(capsys):
    from yolotui.cli import main

    assert main(["serve", "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--public" in err and "--token" in err


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _read_url(process: subprocess.Popen, timeout: float = 60.0) -> str:
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            if process.poll() is not None:
                break
            continue
        seen.append(line)
        match = re.search(r"open (http://\S+\?token=\S+)", line)
        if match:
            return match.group(1)
    raise AssertionError(f"serve printed no URL; output: {''.join(seen)!r}")


class Screen:
    """The text a page's websockets received, ANSI stripped."""

    def __init__(self) -> None:
        self.chunks: list[str] = []
        self.lock = threading.Lock()

    def on_websocket(self, websocket) -> None:
        websocket.on("framereceived", self.add)

    def add(self, payload) -> None:
        text = payload.decode("utf-8", "replace") if isinstance(payload, (bytes, bytearray)) else str(payload)
        with self.lock:
            self.chunks.append(ANSI.sub("", text))

    def text(self, since: int = 0) -> str:
        with self.lock:
            return "".join(self.chunks[since:])

    def mark(self) -> int:
        with self.lock:
            return len(self.chunks)


def _wait_for_text(page, screen: Screen, wanted: str, since: int = 0, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if wanted in screen.text(since):
            return
        page.wait_for_timeout(200)  # lets Playwright deliver websocket events; the condition decides
    raise AssertionError(f"{wanted!r} never drawn; received text ends with: {screen.text(since)[-2000:]!r}")


@needs("chromium")
def test_browser_shows_the_runs_and_opens_a_dashboard(tmp_path, cli_env, yolotui_cmd):
    from playwright.sync_api import sync_playwright

    make_run(tmp_path / "runs", "coco-finished", state="finished", epochs=10, done_epochs=10)
    port = _free_port()
    server = subprocess.Popen([*yolotui_cmd, "serve", "--port", str(port)], env=cli_env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        url = _read_url(server)
        assert url.startswith(f"http://127.0.0.1:{port}/?token=")
        for bad in (f"http://127.0.0.1:{port}/", f"http://127.0.0.1:{port}/?token=wrong-token"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(bad, timeout=10)
            assert refused.value.code == 403
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                screen = Screen()
                page.on("websocket", screen.on_websocket)
                page.goto(url, wait_until="load")
                _wait_for_text(page, screen, "coco-finished")  # the runs table, drawn in the browser
                assert "finished" in screen.text()
                page.locator("#terminal, .xterm").first.click()
                mark = screen.mark()
                page.keyboard.press("Enter")
                # the dashboard's header (the log tail alone is no proof: home's preview pane shows it too)
                _wait_for_text(page, screen, "attempt 1/3", since=mark)
                assert "coco-finished log line" in screen.text(mark)
            finally:
                browser.close()
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
    assert server.returncode is not None


def test_the_serve_command_is_torch_free():
    code = "import sys, yolotui.tui.web, yolotui.commands.serve; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.stdout.strip() == "False", out.stderr

