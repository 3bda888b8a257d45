"""The YOLOv9 training engine in PyTorch, started only as a child process (__main__.py: `python -m
yolotui.engine train --run-dir RUN`, and the tools' entry points).

Subpackages: model/ (building blocks, heads, the YAML builder, conversion, FLOPs), data/ (augmenting dataset,
deterministic sampler, loaders), loss/ (TAL assignment, box/cls/DFL loss), train/ (the loop, checkpoints, EMA,
optimizers, precision, DDP), evaluate/ (validation and metrics), trackers/ (TensorBoard, MLflow, W&B), tools/
(export, the deep checkpoint check, the environment probe).
"""
