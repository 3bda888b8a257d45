"""The backend of yolotui's own YOLOv9 trainer (`python -m yolotui.engine train`): backend.py."""
