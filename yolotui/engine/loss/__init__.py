"""The YOLOv9 loss: assigner.py (task-aligned assignment, TAL), boxes.py (box formats, anchors, IoU) and
yolo_loss.py (the box/cls/DFL loss of one or two heads)."""
