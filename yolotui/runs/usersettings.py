"""settings.yaml in yolotui's config folder, read by the job layer (notification targets, log defaults).

The TUI keeps its theme choice in the same file (yolotui/tui/themes.py); the job layer reads only its own keys:
`notify` (see yolotui/runs/notify.py), `log_config` and `log_level` (see yolotui/runs/logconfig.py),
`watchdog` (see yolotui/runs/watchdog.py). Read with the project's YAML reader (config.load_yaml), which names
the file and line of a syntax error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SETTINGS_FILE = "settings.yaml"
MAX_BYTES = 1 << 20  # a settings file is a few lines; anything bigger is not one


def settings_file() -> Path:
    """Where settings.yaml lives."""
    from yolotui.runs.index import config_dir

    return config_dir() / SETTINGS_FILE


def load_user_settings(strict: bool = False) -> dict[str, Any]:
    """The parsed settings.yaml; {} when absent. A broken file raises UserError when `strict`, else reads as {}."""
    from yolotui.config import load_yaml
    from yolotui.errors import UserError

    path = settings_file()
    try:
        if not path.is_file():
            return {}
        if path.stat().st_size > MAX_BYTES:
            raise UserError(f"settings {path}: larger than {MAX_BYTES >> 10} KiB; it is not a settings file")
        return load_yaml(path, "settings")
    except UserError:
        if strict:
            raise
        return {}
    except OSError:
        return {}
