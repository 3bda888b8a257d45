"""Screens of the yolotui TUI, one a file.

home.py (the runs table), home_panes.py (its GPU strip and preview pane), dashboard.py (one run, live), compare.py (runs side by side), help.py (`?`),
confirm_stop.py and confirm_remove.py (confirmations), restore_mirror.py (restore from a mirror), and the
wizards: wizard_base.py (what they share), wizard_new_run.py, wizard_ultralytics.py, wizard_resume.py,
wizard_finetune.py.
"""
