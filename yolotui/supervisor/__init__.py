"""The detached supervisor of one run: its attempts, how it classifies a trainer's exit, the restart policy
and remedies, the stall watchdog, graceful stop and save-now, and the user's logging configuration.

Started by yolotui.placement.launcher as `python -m yolotui.supervisor.process RUN` (or, under SLURM,
`yolotui.supervisor.slurm_job`); it talks to the rest of yolotui only through the run folder (yolotui.runs).
"""
