"""Experiment trackers for engine runs: TensorBoard by default, MLflow and W&B on request.

base.py is the interface and the metric names; tensorboard.py (with tb_files.py, the event-file reader and
resume pruning), mlflow_tracker.py and wandb_tracker.py are the trackers, each importing its library lazily;
hub.py is what the trainer calls (open, per-N-batches, epoch end, end), fail-soft. The package itself imports
nothing. What run.yaml asks for and what the trainer recorded (the tracker run ids) is yolotui.runs.trackers.
"""
