"""The detached supervisor of one run: its attempts, how it classifies a trainer's exit, the restart policy
and remedies, the stall watchdog, graceful stop and save-now.

Started by yolotui.placement.launcher as `python -m yolotui.supervisor.process RUN` (or, under SLURM,
`yolotui.supervisor.slurm_job`); it talks to the rest of yolotui only through the run folder (yolotui.runs).

- process.py: the attempt loop; outcome.py: an ended attempt judged and the next one prepared; children.py:
  the trainer as a child process; queued.py: waiting in `queued`;
- policy.py (classify and decide), decision.py (Decision, the failure classes, backoff), remedies.py (the
  remedy of each class): docs/architecture.md, "Failure classes";
- watchdog.py (stalls: `hang`), hostoom.py (the kernel's OOM killer: `host-oom`), gpu_monitor.py (GPU
  watching: `gpu-fault`), spot.py (preemption and the mirror);
- stopping.py and grace.py (a graceful stop and how long it waits), control.py (stop and save-now from any
  shell), slurm_job.py (the supervisor inside a SLURM job).
"""
