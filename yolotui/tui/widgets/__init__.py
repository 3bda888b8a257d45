"""Widgets of the yolotui TUI, each with its own DEFAULT_CSS."""
