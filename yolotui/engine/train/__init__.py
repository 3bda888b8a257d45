"""Training: the loop, checkpoints, EMA, optimizers and schedules, precision, DDP, faults and signals.

- trainer.py: the trainer process (events, results, checkpoints); startup.py: device, seeds, options, the
  model;
- checkpoint.py: crash-proof checkpoint files and manifests; checkpointing.py: what the trainer saves and
  restores;
- optim.py, schedule.py, ema.py: optimizer groups and accumulation, LR schedules, the EMA of the weights;
- precision.py, memory_format.py, compiled.py: autocast dtype, channels_last, `--compile`;
- ddp.py: multi-process helpers; freeze.py: frozen layers for fine-tuning; loop_timing.py: data wait vs
  compute;
- failures.py: the failure class of an exception, NanGuard; signals.py: stop and save-now requests; faults.py:
  fault injection for recovery tests.
"""
