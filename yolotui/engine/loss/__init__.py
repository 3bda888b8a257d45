"""The YOLOv9 loss: task-aligned assignment (TAL), box geometry, the box/cls/DFL loss of one or two heads."""
