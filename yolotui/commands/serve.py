"""`yolotui serve`: the TUI in a browser (textual-serve), on localhost with a token in the URL."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags: --host, --port, --token, --public, --theme."""
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1: reach it with ssh -L)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--token", default=None,
                        help="use this token instead of a random one (also allows a non-local --host)")
    parser.add_argument("--public", action="store_true",
                        help="allow a --host that other machines can reach (plain HTTP; the token still applies)")
    parser.add_argument("--theme", metavar="NAME", default=None, help="colour theme of the served TUI")


def run(args: argparse.Namespace) -> int:
    """Check the bind address, print the URL with its token, serve until Ctrl+C."""
    from yolotui.errors import UserError
    from yolotui.tui.web import check_bind, is_local_host, new_token, serve

    if not 0 < args.port < 65536:
        raise UserError(f"--port {args.port}: must be between 1 and 65535")
    if args.token is not None and len(args.token) < 8:
        raise UserError("--token: use at least 8 characters (or leave it out for a random one)")
    check_bind(args.host, args.token, args.public)
    token = args.token or new_token()

    def announce(url: str) -> None:
        print(f"yolotui serve: open {url}", flush=True)
        if is_local_host(args.host):
            print(f"  from another machine: ssh -L {args.port}:127.0.0.1:{args.port} THIS_HOST, then open "
                  "the same address there", flush=True)
        else:
            print("  warning: plain HTTP on a reachable address; anyone with the token controls your runs",
                  flush=True)
        print("  Ctrl+C stops serving (runs keep going)", flush=True)

    serve(args.host, args.port, token, args.theme, announce)
    return 0
