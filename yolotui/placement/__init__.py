"""Where and how a run's supervisor starts: the local detached start, surviving logout and reboot (logind,
systemd service), the local run queue, SLURM submission, the torchrun process layout, and disk-space checks.
"""
