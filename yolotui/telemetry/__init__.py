"""GPU (nvidia-ml-py, imported as pynvml) and host (psutil) readings, with bounded history."""
