"""The one parser of device strings (`--device`, the wizard's device field, opt.yaml's `device`).

Syntax: '' (auto: the first GPU if any, else the CPU), 'cpu', 'cuda' (= 0), '0', 'cuda:1', '0,1'.
`split_device` checks the syntax only; `parse_device` also checks the indices against the GPUs this
process can see (NVML via cuda_device_count, or a count given by the caller); `check_visible`
against a list of indices that telemetry saw. No torch here: the engine turns indices into torch devices.
"""

from __future__ import annotations

import os

from yolotui.errors import UserError

CPU = "cpu"


def cuda_device_count() -> int:
    """CUDA devices this process would see, via NVML and CUDA_VISIBLE_DEVICES; 0 without a driver."""
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
        try:
            count = int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no library, no driver, no GPU: all mean zero devices
        return 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        entries = [e for e in visible.split(",") if e.strip()]
        if not entries or entries[0].strip() == "-1":
            return 0
        count = min(count, len(entries))
    return count


def split_device(device: str | int | None, flag: str = "--device") -> list[int] | None:
    """Syntax only: None for 'cpu', [] for auto (''), else the listed CUDA indices; UserError otherwise.

    `flag` starts the error message ('--device 0,x: not a device ...'); '' starts it with the value alone.
    """
    where = f"{flag} {device}" if flag else str(device)
    text = "" if device is None else str(device).strip().lower()
    if text == CPU:
        return None
    if text == "":
        return []
    if text == "cuda":
        return [0]
    indices: list[int] = []
    for part in text.replace("cuda:", "").split(","):
        part = part.strip()
        if not part.isdigit():
            raise UserError(f"{where}: not a device; use cpu, 0, 0,1 or cuda:0")
        indices.append(int(part))
    if len(set(indices)) != len(indices):
        raise UserError(f"{where}: a device is listed twice")
    return indices


def is_cpu(device: str | int | None) -> bool:
    """True for an explicit 'cpu' (auto '' is not: it may pick a GPU)."""
    return str(device if device is not None else "").strip().lower() == CPU


def parse_device(device: str | int | None, count: int | None = None) -> list[int] | None:
    """'' -> first GPU if any else CPU; 'cpu' -> None; '0', 'cuda:1', '0,1' -> indices. UserError if absent.

    `count` is the number of visible CUDA devices (default: asked of NVML). Returns None for the CPU.
    """
    indices = split_device(device)
    if indices is None:
        return None
    if count is None:
        count = cuda_device_count()
    if not indices:
        return [0] if count > 0 else None
    if count == 0:
        raise UserError(f"--device {device}: no CUDA device is available here; use --device cpu")
    missing = [i for i in indices if i >= count]
    if missing:
        raise UserError(f"--device {device}: cuda:{missing[0]} does not exist, this machine has {count} GPU(s)"
                        f" (0..{count - 1})")
    return indices


def check_visible(device: str, gpu_indices: list[int]) -> str:
    """'cpu', or GPU indices among `gpu_indices` (what telemetry saw), as the canonical --device value."""
    indices = split_device(device, flag="")
    if not indices:
        return CPU
    if not gpu_indices:
        raise UserError(f"{device}: no GPU is visible here; use cpu")
    missing = [i for i in indices if i not in gpu_indices]
    if missing:
        have = ", ".join(str(i) for i in gpu_indices)
        plural = "s" if len(gpu_indices) > 1 else ""
        raise UserError(f"{device}: GPU {missing[0]} is not there (this machine has GPU{plural} {have})")
    return device_string(indices)


def device_string(indices: list[int] | None) -> str:
    """The canonical --device value for parsed indices: 'cpu' or '0,1'."""
    return CPU if not indices else ",".join(str(i) for i in indices)
