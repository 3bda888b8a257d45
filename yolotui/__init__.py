"""yolotui: train YOLOv9 over SSH in detached, supervised runs, watched from a terminal UI."""

__version__ = "0.1.0"
