"""The TUI in a browser: textual-serve behind a token, bound to localhost unless told otherwise.

Each browser tab gets its own `yolotui tui` process (textual-serve runs the app under its web driver),
reading the same run folders as a terminal would. Every request but the static assets must carry the
token: the first page load as `?token=...` (the URL printed at start), which then sets an HttpOnly,
SameSite=Strict cookie that the page's websocket sends back. A websocket from another origin is refused.
The server keeps no access log (it would print the token on every page load).

textual-serve is an optional extra (`pip install 'yolotui[serve]'`); this module imports it only in
`serve()`. No torch here (the TUI's import rules apply).
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import secrets
import shlex
import signal
import sys
from collections.abc import Callable
from urllib.parse import urlsplit

from yolotui.errors import UserError

COOKIE = "yolotui_token"
LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def is_local_host(host: str) -> bool:
    """True for names and addresses that only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    name = host.strip().strip("[]").lower()
    if name in LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def new_token() -> str:
    """A random URL-safe token (128 bits)."""
    return secrets.token_urlsafe(16)


def check_bind(host: str, token: str | None, public: bool) -> None:
    """Refuse a host others can reach unless the user chose that (`--public`) or gave their own `--token`."""
    if is_local_host(host) or public or token:
        return
    raise UserError(f"--host {host}: reachable from other machines over plain HTTP; keep the default "
                    "127.0.0.1 and tunnel with `ssh -L 8000:127.0.0.1:8000 HOST`, or add --public (random "
                    "token) or --token TOKEN to serve on it anyway")


def url_for(host: str, port: int, token: str) -> str:
    """The address to open: http://HOST:PORT/?token=TOKEN (IPv6 hosts bracketed)."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    if shown in ("0.0.0.0", "[::]"):
        shown = "127.0.0.1"
    return f"http://{shown}:{port}/?token={token}"


def tui_command(theme: str | None = None) -> str:
    """The shell command textual-serve runs per browser session: this Python's `yolotui tui`."""
    parts = [sys.executable, "-m", "yolotui", "tui"]
    if theme:
        parts += ["--theme", theme]
    return shlex.join(parts)


def _same_origin(origin: str | None, host: str | None) -> bool:
    if not origin:
        return True  # not a browser (browsers always send Origin on websockets)
    return bool(host) and urlsplit(origin).netloc.lower() == host.lower()


def make_server(command: str, host: str, port: int, token: str, announce: Callable[[str], None]):
    """A textual-serve Server for `command` guarded by `token`; `announce(url)` is called once it listens."""
    try:
        import aiohttp_jinja2
        from aiohttp import web
        from textual_serve.server import Server
    except ImportError:
        raise UserError("yolotui serve needs textual-serve: pip install 'yolotui[serve]'") from None

    @web.middleware
    async def require_token(request, handler):
        if request.path.startswith("/static/"):
            return await handler(request)
        given = request.query.get("token") or request.cookies.get(COOKIE) or ""
        if not hmac.compare_digest(given.encode(), token.encode()):
            raise web.HTTPForbidden(text="yolotui serve: open the address printed at start, with its ?token=\n")
        if request.path == "/ws" and not _same_origin(request.headers.get("Origin"), request.host):
            raise web.HTTPForbidden(text="yolotui serve: websocket from another origin refused\n")
        response = await handler(request)
        if request.path == "/" and request.query.get("token"):
            response.set_cookie(COOKIE, token, httponly=True, samesite="Strict", path="/")
        return response

    class GuardedServer(Server):
        """textual-serve with the token middleware, its URLs taken from the request (works through ssh -L)."""

        async def _make_app(self):
            app = await super()._make_app()
            app.middlewares.append(require_token)
            return app

        async def on_startup(self, app) -> None:
            """Nothing: the address is announced once the socket listens (see `serve_forever`)."""

        def serve(self, debug: bool = False) -> None:
            self.debug = debug
            self.initialize_logging()
            asyncio.run(self.serve_forever())

        def initialize_logging(self) -> None:
            """textual-serve's log setup without local variables in tracebacks (they would show the token)."""
            import logging

            from rich.logging import RichHandler

            logging.basicConfig(level="INFO", format="%(message)s", handlers=[
                RichHandler(show_path=False, show_time=False, rich_tracebacks=True, tracebacks_show_locals=False,
                            console=self.console)])

        async def serve_forever(self) -> None:
            """Listen, announce the address, serve until SIGINT/SIGTERM, then close every session.

            No access log: every page load's first request is `GET /?token=...`, and a log line of it would
            hand the token to whoever reads the terminal's scrollback or a captured log."""
            runner = web.AppRunner(await self._make_app(), handle_signals=False, access_log=None)
            await runner.setup()
            try:
                await web.TCPSite(runner, host, port).start()
                announce(url_for(host, port, token))
                stop = asyncio.Event()
                loop = asyncio.get_running_loop()
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.add_signal_handler(sig, stop.set)
                await stop.wait()
            finally:
                await runner.cleanup()

        @aiohttp_jinja2.template("app_index.html")
        async def handle_index(self, request) -> dict:
            # The page's own address, not the bind address: a tunnel's local port differs from ours.
            base = f"{request.scheme}://{request.host}"
            ws_scheme = "wss" if request.scheme == "https" else "ws"
            static = str(request.app.router["static"].url_for(filename="/")).rstrip("/") + "/"
            return {"font_size": 16, "app_websocket_url": f"{ws_scheme}://{request.host}/ws",
                    "config": {"static": {"url": base + static}}, "application": {"name": self.title}}

    server = GuardedServer(command, host=host, port=port, title="yolotui")
    return server


def serve(host: str, port: int, token: str, theme: str | None, announce: Callable[[str], None]) -> None:
    """Serve the TUI until Ctrl+C / SIGTERM."""
    server = make_server(tui_command(theme), host, port, token, announce)
    try:
        server.serve()
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror}; choose another --port") from None
