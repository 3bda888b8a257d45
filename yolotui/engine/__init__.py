"""The YOLOv9 training engine in PyTorch: model, data, loss, metrics, trainer, checkpoints."""
