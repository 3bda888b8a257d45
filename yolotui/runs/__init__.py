"""The job layer: run directories, the global index, the detached supervisor and its control.

UI-free and torch-free: a script or another UI can use it. Nothing here imports torch.
"""
