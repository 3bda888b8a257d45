"""The new-run wizard's "where" field, shown when hosts are configured: blank runs the run here, a host's name
starts it there (`yolotui train ... --host NAME`). Paths typed in the wizard are then the host's paths, so the
checks that read local files (data.yaml, model YAML, hyp, local GPUs, a free run name here) are left to the
host's own yolotui, which refuses what is wrong with its one-line error, shown in the wizard."""

from __future__ import annotations

from yolotui.errors import UserError

# The wizard fields whose checks read this machine's files or GPUs (skipped for a run on another host).
LOCAL_CHECKS = ("model-path", "data", "device", "hyp", "name", "after", "when-free")


def host_names() -> list[str]:
    """The configured hosts' names ([] when there are none, or settings.yaml cannot be read)."""
    from yolotui.fleet.hosts import load_hosts

    try:
        return [host.name for host in load_hosts()]
    except Exception:  # a broken settings.yaml: the wizard runs here, as without hosts
        return []


def check_host(value: str, names: list[str]) -> None:
    """UserError unless `value` is blank (here) or a configured host."""
    if value and value not in names and value != "local":
        raise UserError(f"where: no host called {value!r}; give one of {', '.join(names)} or leave it blank (here)")


def placeholder(names: list[str]) -> str:
    """The field's placeholder text."""
    return "here (or a host: " + ", ".join(names[:4]) + (" …" if len(names) > 4 else "") + ")"
