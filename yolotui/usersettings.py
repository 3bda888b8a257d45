"""settings.yaml in yolotui's config folder, read by the job layer (notification targets, log defaults).

The TUI keeps its theme choice in the same file (yolotui/tui/themes.py); the job layer reads only its own keys:
`notify` (see yolotui/notify/notifier.py), `log_config` and `log_level` (see yolotui/logconfig.py),
`watchdog` (see yolotui/supervisor/watchdog.py), `mirror` (yolotui/mirror/settings.py) and `preempt` (`{url,
every_s}`, yolotui/placement/preempt.py). `read_yaml_mapping` reads a YAML mapping through the one bounded
reader, yolotui.safe_yaml.load_mapping (runs may not import yolotui.config, a package circle; safe_yaml is a leaf).
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


def read_yaml_mapping(path: Path, what: str, max_bytes: int = MAX_BYTES) -> dict[str, Any]:
    """Parse a YAML mapping of at most `max_bytes`; UserError naming `what`, the file and line when it is wrong
    (yolotui.safe_yaml.load_mapping: alias expansion and nesting bounded too)."""
    from yolotui import safe_yaml

    return safe_yaml.load_mapping(path, what, max_bytes)


def load_user_settings(strict: bool = False) -> dict[str, Any]:
    """The parsed settings.yaml; {} when absent. A broken file raises UserError when `strict`, else reads as {}."""
    from yolotui.errors import UserError

    path = settings_file()
    try:
        if not path.is_file():
            return {}
        return read_yaml_mapping(path, "settings")
    except UserError:
        if strict:
            raise
        return {}
    except OSError:
        return {}
