"""settings.yaml in yolotui's config folder, read by the job layer (notification targets, log defaults).

The TUI keeps its theme choice in the same file (yolotui/tui/themes.py); the job layer reads only its own keys:
`notify` (see yolotui/runs/notify.py), `log_config` and `log_level` (see yolotui/runs/logconfig.py),
`watchdog` (see yolotui/runs/watchdog.py). `read_yaml_mapping` is the job layer's reading of a YAML mapping
(size first, then yolotui.safe_yaml, which bounds alias expansion and nesting; the file and line of a syntax error
named); runs may not import yolotui.config (a package circle), but yolotui.safe_yaml is a leaf module.
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
    """Parse a YAML mapping of at most `max_bytes`; UserError naming `what`, the file and line when it is wrong.

    The parsing is yolotui.safe_yaml's (safe tags, alias expansion and nesting bounded)."""
    import yaml

    from yolotui import safe_yaml
    from yolotui.errors import UserError

    path = Path(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(max_bytes + 1)
    except FileNotFoundError:
        raise UserError(f"{what} {path}: no such file") from None
    except OSError as exc:
        raise UserError(f"{what} {path}: cannot read it ({exc.strerror})") from None
    if len(raw) > max_bytes:
        raise UserError(f"{what} {path}: larger than {max_bytes >> 10} KiB; is it the right file?")
    try:
        data = safe_yaml.load_text(raw.decode("utf-8", errors="replace"), f"{what} {path}")
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise UserError(f"{what} {path}{where}: not valid YAML; fix the syntax there") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"{what} {path}: expected a mapping of keys to values, got {type(data).__name__}")
    return data


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
