"""Where and how a run's supervisor starts.

launcher.py (write run.yaml and status.json, start the detached supervisor), logout.py and logind.py
(surviving logout), service.py (surviving a reboot), queue.py (the conditions a queued run waits for),
slurm.py (SLURM submission and control), distributed.py (the torchrun process layout), diskspace.py (free
space before a launch), ownership.py (whose run folder this is, before its commands run), preempt.py (a
cloud's preemption notice).
"""
