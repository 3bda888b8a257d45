"""Class `gpu-fault`: an attempt that crashed after an Xid or after one of its GPUs fell off the bus.

Such a crash is the GPU's doing, not the code's: retrying on the same GPU usually fails the same way. The
supervisor's GPU watcher (yolotui/runs/gpu_monitor.py) hands the evidence to the policy as the record's
`gpu_fault` ({gpus, xids, lost, free_gpus}). The remedy:

- resume on another free GPU (no process on it, no error) when the run allows it: one GPU (no DDP), attempts
  left, and run.yaml's `restart.gpu_fault` not `stop`. The next attempt gets CUDA_VISIBLE_DEVICES=<that GPU>
  with CUDA_DEVICE_ORDER=PCI_BUS_ID (so CUDA's numbering is NVML's), and `--device 0` where the command takes
  a device flag (the yolotui engine, the official trainer, a command that has --device); the official
  trainer's opt.yaml `device` too, since its --resume reads it;
- else stop, with the reason and what to check.

An `oom` (named by the trainer or in the log), `nan`, `data` or `disk` failure stays what it is; a crash, an
I/O error or a comm failure after the Xid becomes `gpu-fault`. Pure and torch-free.
"""

from __future__ import annotations

import os
import shlex
from typing import Any

from yolotui.runs import decision
from yolotui.runs.layout import FAILED

REPLACEABLE = (None, decision.CRASH, "io", decision.COMM)
DEVICE_BACKENDS = frozenset({"yolotui", "official"})


def evidence_text(facts: dict[str, Any]) -> str:
    """'Xid 79 on GPU 0 (GPU has fallen off the bus)' / 'GPU 1 was lost (...)', the first of each kind."""
    parts = []
    for xid in (facts.get("xids") or [])[:2]:
        if isinstance(xid, dict):
            where = f" on GPU {xid['gpu']}" if xid.get("gpu") is not None else ""
            parts.append(f"Xid {xid.get('xid')}{where}" + (f" ({xid['meaning']})" if xid.get("meaning") else ""))
    for lost in (facts.get("lost") or [])[:2]:
        if isinstance(lost, dict) and not any(p.startswith("Xid 79") for p in parts):
            parts.append(f"GPU {lost.get('gpu')} was lost ({lost.get('error') or 'fell off the bus'})")
    return "; ".join(parts) or "a GPU fault"


def _world_size(events: list[dict[str, Any]]) -> int:
    for event in events:
        if event.get("type") == "start" and isinstance(event.get("world_size"), int):
            return int(event["world_size"])
    return 1


def _why_not_moved(facts: dict[str, Any], record: dict[str, Any], run_config: dict[str, Any],
                   events: list[dict[str, Any]]) -> str | None:
    """Why the run cannot be moved to another GPU, or None when it can."""
    restart = run_config.get("restart") or {}
    if str(restart.get("gpu_fault") or "move") == "stop":
        return "run.yaml's restart.gpu_fault is 'stop'"
    max_attempts, _, _ = decision.restart_settings(run_config)
    attempt = int(record.get("attempt") or 1) - int(record.get("uncounted_attempts") or 0)
    if attempt >= max_attempts:
        return f"attempt limit reached ({max_attempts})"
    gpus = facts.get("gpus") or []
    if len(gpus) > 1 or _world_size(events) > 1 or "," in str(run_config.get("device") or ""):
        return "the run uses several GPUs (a move is not automatic)"
    if not facts.get("free_gpus"):
        return "no other free GPU"
    return None


def gpu_fault_decision(record: dict[str, Any], run_config: dict[str, Any], events: list[dict[str, Any]],
                       event_class: str | None, how: str) -> decision.Decision | None:
    """The decision for a crash after an Xid or a lost GPU, or None when the attempt shows neither (or its
    failure has a class of its own)."""
    facts = record.get("gpu_fault")
    if not isinstance(facts, dict) or event_class not in REPLACEABLE:
        return None
    if event_class is None:
        from yolotui.runs.failure_text import classify_text

        if classify_text(record.get("log_tail")) == decision.OOM:  # CUDA's out-of-memory in the log: oom
            return None
    evidence = evidence_text(facts)
    message = f"{how} after {evidence}"
    name = record.get("name") or run_config.get("name") or ""
    why_not = _why_not_moved(facts, record, run_config, events)
    if why_not is not None:
        return decision.Decision(
            retry=False, state=FAILED, failure_class=decision.GPU_FAULT, message=message,
            remedy=(f"not retried on another GPU: {why_not}; check the GPU (nvidia-smi, dmesg; a reset with "
                    "nvidia-smi -r or a reboot), then resume it on a healthy one: "
                    f"yolotui resume {shlex.quote(str(name))} --device N"))
    target = int(facts["free_gpus"][0])
    env_now = {**os.environ, **(run_config.get("env") or {}), **((record.get("changes_so_far") or {}).get("env") or {})}
    changes: dict[str, Any] = {"env": {"CUDA_VISIBLE_DEVICES": str(target), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}}
    command = [str(a) for a in record.get("command") or run_config.get("command") or []]
    backend = run_config.get("backend")
    if backend in DEVICE_BACKENDS or any(a == "--device" or a.startswith("--device=") for a in command):
        changes["args"] = {"--device": "0"}
    if backend == "official":
        changes["opt_yaml"] = {"device": "0"}
    settings = {"CUDA_VISIBLE_DEVICES": [env_now.get("CUDA_VISIBLE_DEVICES"), str(target)]}
    _, backoff, _ = decision.restart_settings(run_config)
    attempt = int(record.get("attempt") or 1) - int(record.get("uncounted_attempts") or 0)
    max_attempts, _, _ = decision.restart_settings(run_config)
    bad = ",".join(str(g) for g in facts.get("gpus") or []) or "?"
    return decision.Decision(
        retry=True, delay_s=backoff, changes=changes, settings=settings, failure_class=decision.GPU_FAULT,
        message=message, state=FAILED,
        remedy=(f"resume on GPU {target} instead of GPU {bad} (CUDA_VISIBLE_DEVICES={target}); "
                f"retry {attempt + 1}/{max_attempts} after {backoff:g} s"))
