"""`yolotui service install [--dry-run]` / `yolotui service uninstall`: resume interrupted runs at boot.

`install` writes a systemd user unit, ~/.config/systemd/user/yolotui-resume.service, that runs
`yolotui resume --interrupted` when the user's systemd manager starts, prints the commands that enable it
(lingering included, so it runs at boot before anyone logs in) and the docker `--restart` advice for
containers. `--dry-run` prints the unit and where it would go, writing nothing.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """install | uninstall, and --dry-run."""
    parser.add_argument("action", choices=["install", "uninstall"], help="install or remove the resume unit")
    parser.add_argument("--dry-run", action="store_true", help="print the unit and its path; write nothing")


def run(args: argparse.Namespace) -> int:
    """Write (or remove) the unit and say how to enable it."""
    from yolotui.placement import service

    if args.action == "uninstall":
        path = service.unit_path()
        if args.dry_run:
            print(f"would remove {path}")
            return 0
        if not path.exists():
            print(f"{path} is not installed; nothing to remove")
            return 0
        path.unlink()
        print(f"removed {path}; then: systemctl --user daemon-reload")
        return 0
    path, text, written = service.install_unit(dry_run=args.dry_run)
    if written:
        print(f"wrote {path}")
    else:
        print(f"# {path} (dry run: nothing written)")
        print(text, end="")
    print("enable it with:")
    for line in service.enable_instructions():
        print(f"  {line}")
    print(service.DOCKER_ADVICE)
    return 0


def print_resume_interrupted() -> int:
    """`yolotui resume --interrupted`: relaunch every interrupted run, one line each; 1 if any failed."""
    from yolotui.placement import service

    results = service.resume_interrupted()
    if not results:
        print("no interrupted runs")
        return 0
    for result in results:
        print(result.message if result.resumed else f"could not resume {result.name} ({result.run_dir}): "
              f"{result.message}")
    return 0 if all(r.resumed for r in results) else 1
