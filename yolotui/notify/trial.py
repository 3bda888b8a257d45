"""`notify test`: send a test message to every notification target (settings.yaml's, a run's, extra URLs)."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any

from yolotui.errors import UserError


@dataclass
class NotifyTestResult:
    """How many targets there were, and one error line per target that failed. `labels`: each target as logs
    name it (yolotui.notify.redact: scheme and a short hash, never its token), in the order configured."""

    targets: int
    errors: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)

    @property
    def sent(self) -> int:
        """Targets that got the message."""
        return self.targets - len(self.errors)

    def to_json(self) -> dict[str, Any]:
        """What `--json` prints."""
        return {"targets": self.targets, "sent": self.sent, "errors": list(self.errors), "labels": list(self.labels)}


def notify_test(run: str | None = None, urls: list[str] | None = None) -> NotifyTestResult:
    """Send the test message now, in this process; UserError when no target is configured."""
    from yolotui.notify.notifier import make_event, targets_for
    from yolotui.notify.redact import command_label, target_label
    from yolotui.notify.send import send_all
    from yolotui.usersettings import load_user_settings, settings_file

    run_config: dict[str, Any] = {}
    name, run_dir = "test", ""
    if run:
        from yolotui.runs.resolve import resolve_run
        from yolotui.runs.runconfig import read_run_config

        path = resolve_run(run)
        run_config, name, run_dir = read_run_config(path), path.name, str(path)
    extra = [u.strip() for u in urls or [] if u.strip()]
    if extra:
        own = dict(run_config.get("notify") or {})
        own["urls"] = [*(own.get("urls") or []), *extra]
        run_config = {**run_config, "notify": own}
    targets = targets_for(run_config, load_user_settings(strict=True))
    if not targets:
        raise UserError(f"no notification targets: add notify.urls or notify.command to {settings_file()}, "
                        "or give --notify URL", exit_code=1)
    event = make_event("test", name, run_dir, f"yolotui test notification from {socket.gethostname()}")
    labels = [target_label(u) for u in targets.urls] + ([command_label(targets.command)] if targets.command else [])
    return NotifyTestResult(len(labels), send_all(event, targets.to_dict()), labels)
