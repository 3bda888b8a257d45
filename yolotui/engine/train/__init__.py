"""Training: the loop (trainer), checkpoints, EMA, optimizers and schedules, precision, DDP, faults and signals."""
