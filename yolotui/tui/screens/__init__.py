"""Screens of the yolotui TUI: home (runs table), run dashboard, help."""
