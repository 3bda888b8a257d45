"""Run a command on a configured host: `yolotui stop|resume|save|status|logs|train|exec ... --host HOST`, or
RUN given as HOST:RUN. The same command line runs there (the host's yolotui), its output shown here; every
argument is quoted for the remote shell, so a run name is data, never a command."""

from __future__ import annotations

import argparse
import sys

# Commands that may run on a host, and the dest of their positional RUN (which may be HOST:RUN), if any.
REMOTE_COMMANDS = {"stop": "run", "resume": "run", "save": "run", "status": "run", "logs": "run",
                   "doctor": "target", "train": None, "exec": None, "finetune": None, "rm": None}


def add_host_flag(parser: argparse.ArgumentParser) -> None:
    """--host HOST on a command that may run remotely."""
    parser.add_argument("--host", default=None, metavar="HOST",
                        help="run this on a configured host (yolotui hosts ls); RUN may also be HOST:RUN")


def remote_target(args: argparse.Namespace):
    """(host, the run's name there or None) when the command is meant for a host; (None, None) for here."""
    from yolotui.errors import UserError
    from yolotui.fleet.hosts import find_host, split_remote

    dest = REMOTE_COMMANDS.get(args.command)
    run = getattr(args, dest, None) if dest else None
    host = find_host(args.host) if getattr(args, "host", None) else None
    if isinstance(run, str):
        named, rest = split_remote(run)
        if named is not None:
            if host is not None and host.name != named.name:
                raise UserError(f"--host {host.name} and RUN {run}: two different hosts; give one")
            return named, rest
    return host, None


def remote_argv(argv: list[str], command: str, run: str | None, original_run: str | None) -> list[str]:
    """`argv` for the host: from the command on, --host HOST dropped, HOST:RUN replaced by RUN."""
    tokens = list(argv[argv.index(command):])
    out: list[str] = []
    skip = False
    replaced = False
    for token in tokens:
        if skip:
            skip = False
            continue
        if token == "--host":
            skip = True
            continue
        if token.startswith("--host="):
            continue
        if not replaced and original_run is not None and run is not None and token == original_run:
            out.append(run)
            replaced = True
            continue
        out.append(token)
    return out


def forward(host, argv: list[str]) -> int:
    """Run `yolotui ARGV` on `host` with this terminal's stdout/stderr; the remote exit code (255: no link)."""
    import subprocess

    from yolotui.fleet.ssh import ACTION_TIMEOUT_S, ssh_argv

    try:
        done = subprocess.run(ssh_argv(host, argv), stdin=subprocess.DEVNULL, timeout=ACTION_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        print(f"yolotui: error: {host.name}: no answer within {ACTION_TIMEOUT_S:.0f} s; the command may still "
              f"be running there (yolotui ls --all-hosts)", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"yolotui: error: cannot run ssh: {exc.strerror or exc}", file=sys.stderr)
        return 1
    if done.returncode == 255:
        print(f"yolotui: error: {host.name} ({host.target}) unreachable over ssh; nothing was run there",
              file=sys.stderr)
    elif done.returncode == 127:
        from yolotui.fleet.probe import INSTALL_HINT

        print(f"yolotui: error: yolotui is not installed on {host.name}: {INSTALL_HINT}", file=sys.stderr)
    return done.returncode


def maybe_forward(args: argparse.Namespace, argv: list[str]) -> int | None:
    """Forward to the host when the command names one (the exit code); None when it runs here."""
    if args.command not in REMOTE_COMMANDS:
        return None
    host, run = remote_target(args)
    if host is None:
        return None
    dest = REMOTE_COMMANDS[args.command]
    return forward(host, remote_argv(argv, args.command, run, getattr(args, dest, None) if dest else None))
