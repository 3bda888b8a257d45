"""Theme files (themes/*.yaml) and the remembered theme choice (settings.yaml in the config folder).

A theme file holds Textual theme fields: name, primary, secondary, accent, warning, error, success,
foreground, background, surface, panel, boost, dark, luminosity_spread, text_alpha, and `variables` (a map of
Textual CSS variables). Installed, the files live in the package `yolotui.themes`; in an uninstalled checkout
they are read from the repository's top-level themes/ folder.
"""

from __future__ import annotations

import importlib.resources
from dataclasses import fields
from pathlib import Path
from typing import Any

import yaml
from textual.theme import Theme

from yolotui import safe_yaml
from yolotui.errors import UserError
from yolotui.runs.atomic import atomic_write_text
from yolotui.runs.index import config_dir

SETTINGS_FILE = "settings.yaml"
DEFAULT_THEME = "yolo-night"
_THEME_FIELDS = {f.name for f in fields(Theme)}


def theme_folder() -> Any:
    """The folder of shipped theme files: the `yolotui.themes` package, else the checkout's themes/."""
    try:
        folder = importlib.resources.files("yolotui.themes")
        if any(entry.name.endswith(".yaml") for entry in folder.iterdir()):
            return folder
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError, TypeError):
        pass
    return Path(__file__).resolve().parent.parent.parent / "themes"


def parse_theme(text: str, source: str) -> Theme:
    """Build a Theme from a theme file's text; UserError naming `source` and the field when it is wrong."""
    try:
        data = safe_yaml.load_text(text, source, fast=True)  # shipped theme files: the C parser, bounded
    except yaml.YAMLError as exc:
        raise UserError(f"{source}: not valid YAML ({exc.__class__.__name__}); fix the file or delete it") from exc
    if not isinstance(data, dict):
        raise UserError(f"{source}: a theme file must be a mapping of fields (name, primary, ...)")
    unknown = sorted(set(data) - _THEME_FIELDS)
    if unknown:
        raise UserError(f"{source}: unknown field '{unknown[0]}'; allowed: {', '.join(sorted(_THEME_FIELDS))}")
    for required in ("name", "primary"):
        if not isinstance(data.get(required), str) or not data[required]:
            raise UserError(f"{source}: field '{required}' is required (a string)")
    variables = data.get("variables") or {}
    if not isinstance(variables, dict):
        raise UserError(f"{source}: field 'variables' must be a mapping of CSS variable names to values")
    data["variables"] = {str(k): str(v) for k, v in variables.items()}
    try:
        theme = Theme(**data)
        theme.to_color_system()  # colours are parsed here: a bad one fails now, not mid-render
    except Exception as exc:
        raise UserError(f"{source}: {exc}") from exc
    return theme


def load_themes() -> tuple[list[Theme], list[str]]:
    """Every shipped theme, and one message per theme file that could not be used."""
    themes: list[Theme] = []
    problems: list[str] = []
    try:
        entries = sorted(theme_folder().iterdir(), key=lambda entry: entry.name)
    except OSError as exc:
        return [], [f"themes folder unreadable: {exc}"]
    for entry in entries:
        if not entry.name.endswith(".yaml"):
            continue
        try:
            themes.append(parse_theme(entry.read_text(encoding="utf-8"), f"themes/{entry.name}"))
        except (UserError, OSError) as exc:
            problems.append(str(exc))
    return themes, problems


def settings_path() -> Path:
    """Where the user's TUI settings live."""
    return config_dir() / SETTINGS_FILE


def load_settings() -> dict[str, Any]:
    """The saved settings; {} when there are none or the file is unreadable."""
    return load_settings_checked()[0]


SETTING_TYPES: dict[str, type] = {"theme": str}


def load_settings_checked() -> tuple[dict[str, Any], list[str]]:
    """(settings, what was ignored): a broken settings.yaml (not UTF-8, not YAML, a wrongly typed field) never
    stops the TUI; it starts with the defaults and says, one line per problem, what it ignored."""
    path = settings_path()
    try:
        data = safe_yaml.load_file(path)
    except FileNotFoundError:
        return {}, []
    except UnicodeDecodeError:
        return {}, [f"{path}: not UTF-8 text; ignored it and started with the default settings"]
    except yaml.YAMLError as exc:
        where = safe_yaml.error_line(exc)
        return {}, [f"{path}{where}: not valid YAML; ignored it and started with the default settings"]
    except (OSError, UserError) as exc:
        return {}, [f"{path}: {getattr(exc, 'strerror', None) or exc}; started with the default settings"]
    if data is None:
        return {}, []
    if not isinstance(data, dict):
        return {}, [f"{path}: expected a mapping such as 'theme: yolo-night'; ignored it"]
    settings, problems = {}, []
    for key, value in data.items():
        expected = SETTING_TYPES.get(str(key))
        if expected is not None and not isinstance(value, expected):
            problems.append(f"{path}: {key}: expected {expected.__name__}, got {type(value).__name__}; "
                            "ignored it (default used)")
            continue
        settings[str(key)] = value
    return settings, problems


def save_settings(settings: dict[str, Any]) -> None:
    """Atomically write the settings (errors are swallowed: a read-only home must not break the TUI)."""
    try:
        atomic_write_text(settings_path(), yaml.safe_dump(settings, sort_keys=True))
    except OSError:
        pass


def remember_theme(name: str) -> None:
    """Save `name` as the theme to open with next time."""
    settings = load_settings()
    if settings.get("theme") != name:
        settings["theme"] = name
        save_settings(settings)
