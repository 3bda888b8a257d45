"""Widgets of the yolotui TUI, each with its own DEFAULT_CSS: chart.py (braille line chart), sparkline.py,
panels.py (the dashboard's text panels), gpu_health.py (the GPU panel's health lines), path_input.py (a path
field with completion)."""
