"""GPU (nvidia-ml-py, imported as pynvml) and host (psutil) readings, with bounded history.

- gpu.py: NVML readings, robust to anything NVML may say; guard.py: every NVML call with a time limit;
  nvml_module.py: which NVML module; sanity.py: implausible readings dropped;
- clocks.py (throttle reasons, clocks), ecc.py (ECC errors), board.py (PCIe link, energy, bus id), xid.py (Xid
  errors), gpu_text.py (those readings in words);
- gpu_watch.py (the supervisor's watcher child), gpu_summary.py (an attempt's GPU summary), history.py
  (bounded history for sparklines), host.py (CPU, memory, the run's process tree), slowness.py (the "why is it
  slow" verdict).
"""
