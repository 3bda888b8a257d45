"""The Textual app. Nothing here imports torch; everything shown is rebuilt from run directories.

app.py (the app: home and dashboards, themes, notifications), app_actions.py (the run actions and wizards),
actions.py (the `yolotui ...` command lines the wizards run), runview.py (a run folder read incrementally for
the dashboard), sources.py (the door to the health and telemetry libraries), watch.py (change notification for
run folders), themes.py (theme files and the remembered choice), web.py (the TUI in a browser),
wizard_checks.py (the checks behind the wizards' inline errors), terminal.py (the
terminal kept for Textual alone: stray writes to tui.log, the real size), home_source.py (where home's rows come from), home_data.py
(a row's progress, ETA, backend and mAP trend, read at bounded cost), preview_data.py (the preview pane's
facts), fleet_source.py, fleet_home.py and fleet_wizard.py (other hosts' runs on
home, read off the UI thread, and the new-run wizard's "where"). Subpackages: screens/ (one screen a file), widgets/ (each with its own
DEFAULT_CSS).
"""
