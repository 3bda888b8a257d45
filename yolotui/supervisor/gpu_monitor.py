"""The supervisor's side of GPU watching: a watcher child per attempt, its readings summed into the attempt's
GPU summary, notifications when throttling or new uncorrected ECC errors (or an Xid) begin, and the facts
the restart policy needs to tell a GPU fault from a crash.

The supervisor never calls NVML itself: `start` launches `python -m yolotui.telemetry.gpu_watch` (its own
session, stdio pipes), `step` reads whatever lines it wrote (non-blocking, bounded) into a
telemetry.gpu_summary.GpuSummary, and `finish` closes its stdin (it takes one last sample) and waits at most
FINISH_WAIT_S for it. The summary is status.json's `gpu_summary` (a list: one entry per attempt of this
supervisor), written at once when something noteworthy happens, else every SAVE_EVERY_S (or ten samples, if sooner).

YOLOTUI_GPU_SAMPLE_S sets the sampling interval (default 5 s; 0 turns GPU watching off). A run on the CPU
(`device: cpu`) is not watched.

Class `gpu-fault` (gpu_fault_decision, for the policy): an attempt that crashed after an Xid or after one of its
GPUs fell off the bus. Such a crash is the GPU's doing, not the code's: retrying on the same GPU usually fails
the same way. The watcher's evidence reaches the policy as the record's `gpu_fault` ({gpus, xids, lost,
free_gpus}). The remedy:

- resume on another free GPU (no process on it, no error) when the run allows it: one GPU (no DDP), attempts
  left, and run.yaml's `restart.gpu_fault` not `stop`. The next attempt gets CUDA_VISIBLE_DEVICES=<that GPU>
  with CUDA_DEVICE_ORDER=PCI_BUS_ID (so CUDA's numbering is NVML's), and `--device 0` where the command takes
  a device flag (a backend that takes the `device` remedy, or a command that has --device); opt.yaml's
  `device` too for a backend whose --resume reads its options there (the official trainer);
- else stop, with the reason and what to check.

An `oom` (named by the trainer or in the log), `nan`, `data` or `disk` failure stays what it is; a crash, an
I/O error or a comm failure after the Xid becomes `gpu-fault`. Pure and torch-free.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import signal
import subprocess
import sys
import time
from typing import Any

from yolotui.backends.base import REMEDY_DEVICE, REMEDY_OPT_YAML
from yolotui.runs.layout import FAILED
from yolotui.runs.runconfig import restart_settings
from yolotui.supervisor import decision
from yolotui.supervisor.remedies import backend_remedies
from yolotui.telemetry import clocks
from yolotui.telemetry.gpu_summary import GpuSummary

DEFAULT_INTERVAL_S = 5.0
SAVE_EVERY_S = 30.0
SAVE_EVERY_SAMPLES = 10  # and at least every this many samples (a fast test interval saves faster)
FINISH_WAIT_S = 4.0
READ_LIMIT = 1 << 20  # bytes read from the watcher per step
LINE_LIMIT = 1 << 20  # a longer line is garbage, dropped
ENV_INTERVAL = "YOLOTUI_GPU_SAMPLE_S"


def interval_s() -> float:
    """The sampling interval from YOLOTUI_GPU_SAMPLE_S (default 5 s); 0 when watching is off."""
    try:
        return max(0.0, float(os.environ.get(ENV_INTERVAL, DEFAULT_INTERVAL_S)))
    except ValueError:
        return DEFAULT_INTERVAL_S


def device_gpus(device: Any) -> list[int]:
    """The GPU indices a device string names ('0', '0,1', 'cuda:1'); [] for cpu, '' or anything else."""
    out = []
    for part in str(device or "").replace("cuda:", "").split(","):
        part = part.strip()
        if part.isdigit():
            out.append(int(part))
    return out


class GpuMonitor:
    """One attempt's watcher child and summary (see the module docstring)."""

    def __init__(self, attempt: int, trainer_pid: int | None, device: Any, interval: float) -> None:
        self.summary = GpuSummary(attempt, device_gpus(device), interval)
        self.interval = interval
        self.latest: dict[str, Any] | None = None  # the newest snapshot dict
        self.buffer = b""
        self.returncode: int | None = None
        self.last_save = 0.0
        self.child = subprocess.Popen(  # an argv list, never a shell; its stderr is the supervisor's log
            [sys.executable, "-m", "yolotui.telemetry.gpu_watch", "--interval", f"{interval:g}",
             "--pid", str(int(trainer_pid or 0))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True, start_new_session=True)
        os.set_blocking(self.child.stdout.fileno(), False)

    # -- reading --------------------------------------------------------------------------------------------
    def read(self) -> list[str]:
        """Take in the lines the watcher wrote since the last call; returns the summary's news."""
        news: list[str] = []
        stream = self.child.stdout
        if stream is None or stream.closed:
            return news
        got = 0
        while got < READ_LIMIT:
            try:
                chunk = os.read(stream.fileno(), 65536)
            except BlockingIOError:
                break
            except OSError:
                chunk = b""
            if not chunk:
                stream.close()
                break
            got += len(chunk)
            self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        if len(self.buffer) > LINE_LIMIT:
            self.buffer = b""
        for line in lines:
            if not line.strip() or len(line) > LINE_LIMIT:
                continue
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict):
                self.latest = data
                news += self.summary.add(data)
        return news

    def reaped(self, pid: int, wait_status: int) -> bool:
        """Claim the watcher's exit when the supervisor's waitpid(-1) collected it."""
        if pid != self.child.pid:
            return False
        self.returncode = os.waitstatus_to_exitcode(wait_status)
        self.child.returncode = self.returncode
        return True

    def stop(self, wait_s: float = FINISH_WAIT_S) -> None:
        """Close the watcher's stdin (it takes a last sample and exits), read it to the end, at most `wait_s`."""
        try:
            if self.child.stdin is not None:
                self.child.stdin.close()
        except OSError:
            pass
        self.read()
        if self.latest is None or not self.latest.get("available"):
            wait_s = 0.0  # no reading yet (nothing registered for Xids either) or no GPU: a last one adds nothing
        deadline = time.monotonic() + wait_s
        while self.child.stdout is not None and not self.child.stdout.closed and time.monotonic() < deadline:
            self.read()
            time.sleep(0.02)
        self.read()
        if self.child.stdout is not None and not self.child.stdout.closed:
            self.child.stdout.close()
        if self.returncode is None:
            try:
                os.killpg(self.child.pid, signal.SIGKILL)  # harmless when it has exited already
            except OSError:
                pass
            try:
                got, status = os.waitpid(self.child.pid, 0)
                if got:
                    self.reaped(got, status)
            except ChildProcessError:
                pass

    def fault_facts(self) -> dict[str, Any] | None:
        """What the restart policy needs when an Xid or a lost GPU was seen (None when neither), with the GPUs
        that look free now (no process on them, no error) for a move."""
        if not self.summary.fault:
            return None
        bad = {x.get("gpu") for x in self.summary.xids} | {x.get("gpu") for x in self.summary.lost}
        free = []
        for reading in (self.latest or {}).get("gpus") or []:
            if not isinstance(reading, dict) or reading.get("error"):
                continue
            index = reading.get("index")
            if index in bad or index in self.summary.gpus or reading.get("processes"):
                continue
            if isinstance(index, int):
                free.append(index)
        return {"gpus": list(self.summary.gpus), "xids": list(self.summary.xids), "lost": list(self.summary.lost),
                "free_gpus": free}


# ---------------------------------------------------------------------------------------- the supervisor's hooks

def start(supervisor: Any, attempt: int, changes: dict[str, Any] | None = None) -> GpuMonitor | None:
    """Start watching the GPUs for `attempt` (None when watching is off or the watcher cannot start). The run's
    GPUs are those its processes use; until they show, CUDA_VISIBLE_DEVICES of the attempt (a gpu-fault move
    sets it) or else the run's device."""
    interval = interval_s()
    if interval <= 0 or supervisor.trainer is None or str(supervisor.status.device or "").lower() == "cpu":
        return None
    env = {**(supervisor.config.get("env") or {}), **((changes or {}).get("env") or {})}
    visible = str(env.get("CUDA_VISIBLE_DEVICES") or "")
    device = visible if device_gpus(visible) else supervisor.status.device
    try:
        monitor = GpuMonitor(attempt, supervisor.trainer.pid, device, interval)
    except OSError as exc:
        supervisor_log(supervisor, f"GPU watcher not started: {exc}")
        return None
    summaries = [s for s in (supervisor.status.gpu_summary or []) if isinstance(s, dict)
                 and s.get("attempt") != attempt]
    supervisor.status.gpu_summary = [*summaries, monitor.summary.to_dict()][-20:]
    return monitor


def step(supervisor: Any, epoch_events: list[dict[str, Any]] = ()) -> None:
    """Read the watcher, mark finished epochs, notify news, and keep status.json's summary current."""
    monitor: GpuMonitor | None = getattr(supervisor, "gpu", None)
    if monitor is None:
        return
    news = monitor.read()
    for event in epoch_events:
        if event.get("type") == "epoch":
            monitor.summary.mark_epoch(event.get("epoch") if isinstance(event.get("epoch"), int) else None)
    _store(supervisor, monitor)
    for kind in news:
        text = notification_text(kind, monitor)
        if text:
            supervisor_log(supervisor, f"gpu: {text}")
            from yolotui.notify import notifier as notify

            supervisor.notifier.send(notify.make_event("gpu", supervisor.status.name, supervisor.run_dir, text,
                                                       attempt=monitor.summary.attempt, gpu_news=kind))
    now = time.monotonic()
    if news or now - monitor.last_save >= min(SAVE_EVERY_S, SAVE_EVERY_SAMPLES * monitor.interval):
        monitor.last_save = now
        supervisor.save()


def finish(supervisor: Any) -> dict[str, Any] | None:
    """End the attempt's watching: a last sample, the summary stored; returns the GPU-fault facts or None."""
    monitor: GpuMonitor | None = getattr(supervisor, "gpu", None)
    if monitor is None:
        return None
    monitor.stop()
    _store(supervisor, monitor)
    supervisor.gpu = None
    return monitor.fault_facts()


def _store(supervisor: Any, monitor: GpuMonitor) -> None:
    entry = monitor.summary.to_dict()
    summaries = list(supervisor.status.gpu_summary or [])
    if summaries and isinstance(summaries[-1], dict) and summaries[-1].get("attempt") == entry["attempt"]:
        summaries[-1] = entry
    else:
        summaries.append(entry)
    supervisor.status.gpu_summary = summaries[-20:]


def supervisor_log(supervisor: Any, message: str) -> None:
    """A line in the supervisor's log (the `yolotui.supervisor` logger)."""
    logging.getLogger("yolotui.supervisor").info(message)


# ------------------------------------------------------------------------------------------- the words

ADVICE = {
    "thermal": "improve the airflow (fans, dust, room temperature) or move the run to a cooler GPU",
    "power cap": "it runs at its power limit: raise it (sudo nvidia-smi -pl WATTS, up to the board's maximum) "
                 "or use another GPU",
    "power brake": "an external power-brake signal: check the power supply and its cables",
    "hardware slowdown": "a hardware slowdown (heat or power): check the cooling and the power supply",
}


def notification_text(kind: str, monitor: GpuMonitor) -> str:
    """The words of a GPU notification, with what to do."""
    summary = monitor.summary
    readings = [r for r in (monitor.latest or {}).get("gpus") or []
                if isinstance(r, dict) and r.get("index") in summary.gpus]
    if kind == "throttle":
        slow = [r for r in readings if clocks.reason_groups(r.get("throttle_mask"))] or readings
        if not slow:
            return ""
        reading = slow[0]
        groups = clocks.reason_groups(reading.get("throttle_mask"))
        temp = reading.get("temperature_c")
        advice = "; ".join(ADVICE[g] for g in groups if g in ADVICE) or "check the cooling and the power limit"
        return (f"GPU {reading.get('index')} {clocks.describe(reading)}"
                + (f" at {temp:.0f}°C" if isinstance(temp, (int, float)) else "")
                + f": the run trains slower; {advice}")
    if kind == "ecc":
        new = summary.to_dict().get("ecc_new") or {}
        return (f"{new.get('uncorrected', 0)} new uncorrected ECC error(s) on GPU "
                + ",".join(map(str, summary.gpus)) + " during the run: it may crash; check nvidia-smi -q -d ECC "
                "and prefer another GPU for the next run (yolotui resume NAME --device N)")
    if kind == "xid":
        xid = summary.xids[-1] if summary.xids else {}
        where = f"GPU {xid.get('gpu')}" if xid.get("gpu") is not None else "a GPU of the run"
        return (f"Xid {xid.get('xid')} on {where} ({xid.get('meaning')}): the run may crash; see dmesg and "
                "nvidia-smi; a crash after it is classified gpu-fault")
    if kind == "lost":
        lost = summary.lost[-1] if summary.lost else {}
        return (f"GPU {lost.get('gpu')} fell off the bus or stopped answering ({lost.get('error')}): the run "
                "will crash; the GPU needs a reset or a reboot (nvidia-smi -r, or reboot)")
    return ""

REPLACEABLE = (None, decision.CRASH, "io", decision.COMM)


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
    max_attempts, _, _ = restart_settings(run_config)
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
        from yolotui.failure_text import classify_text

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
    takes, _ = backend_remedies(run_config)
    if REMEDY_DEVICE in takes or any(a == "--device" or a.startswith("--device=") for a in command):
        changes["args"] = {"--device": "0"}
    if REMEDY_OPT_YAML in takes:  # its --resume reads the device from opt.yaml
        changes["opt_yaml"] = {"device": "0"}
    settings = {"CUDA_VISIBLE_DEVICES": [env_now.get("CUDA_VISIBLE_DEVICES"), str(target)]}
    _, backoff, _ = restart_settings(run_config)
    attempt = int(record.get("attempt") or 1) - int(record.get("uncounted_attempts") or 0)
    max_attempts, _, _ = restart_settings(run_config)
    bad = ",".join(str(g) for g in facts.get("gpus") or []) or "?"
    return decision.Decision(
        retry=True, delay_s=backoff, changes=changes, settings=settings, failure_class=decision.GPU_FAULT,
        message=message, state=FAILED,
        remedy=(f"resume on GPU {target} instead of GPU {bad} (CUDA_VISIBLE_DEVICES={target}); "
                f"retry {attempt + 1}/{max_attempts} after {backoff:g} s"))
