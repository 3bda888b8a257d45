"""Widgets of the yolotui TUI, each with its own DEFAULT_CSS: chart.py (braille line chart), sparkline.py,
panels.py (the dashboard's text panels), gpu_health.py (the GPU panel's health lines), path_input.py (a path
field with completion), panel_base.py (what the panels share, light enough for home's first frame),
gpu_strip.py (home's line per GPU), run_cells.py (home's table cells and sort), run_preview.py (the preview
pane)."""
