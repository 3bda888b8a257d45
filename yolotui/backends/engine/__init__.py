"""The backend of yolotui's own YOLOv9 trainer (`python -m yolotui.engine train`): backend.py (the
Backend), resume.py (its resume checks and the restore of last.pt)."""
