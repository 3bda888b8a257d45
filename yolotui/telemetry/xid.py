"""Xid errors: the NVIDIA driver's reports of GPU faults, read from NVML events or, as a fallback, the kernel log.

An Xid is the driver saying a GPU did something wrong (a memory fault, a double-bit ECC error, a fall off the
bus ...); a training run on that GPU usually crashes soon after with a vague CUDA error. `XidWatcher.poll()`
returns the Xids seen since the last poll, each with its GPU index where known:

- NVML events (`nvmlDeviceRegisterEvents` with the Xid critical-error type, drained with a zero timeout
  through the guarded caller): the preferred source;
- where NVML events are unavailable (an old driver, a container, a fake), the kernel log: /dev/kmsg when it is
  readable, else /var/log/kern.log, /var/log/messages or /var/log/syslog; only lines written after the watcher
  started are read, at most READ_LIMIT bytes a poll, torn or garbled lines skipped.
"""

from __future__ import annotations

import errno
import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from yolotui.telemetry import sanity
from yolotui.telemetry.board import bus_key

XID_EVENT_TYPE = 0x08  # nvmlEventTypeXidCriticalError
ERROR_TIMEOUT = 10  # NVML_ERROR_TIMEOUT: no event waiting
READ_LIMIT = 256 * 1024  # bytes of kernel log read per poll
MAX_EVENTS_PER_POLL = 64
KERNEL_LOGS = ("/var/log/kern.log", "/var/log/messages", "/var/log/syslog")
KMSG = "/dev/kmsg"
FELL_OFF_XID = 79

# The Xids a training run meets most (NVIDIA's Xid catalogue), in a few words each.
MEANINGS = {
    13: "graphics engine exception (often a bug or bad memory access in a kernel)",
    31: "GPU memory page fault (illegal address)",
    43: "GPU stopped processing (a kernel was killed)",
    45: "preemptive cleanup after an earlier error",
    48: "double-bit ECC error (uncorrectable memory error)",
    61: "internal micro-controller breakpoint",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping failed",
    68: "video processor exception",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error (the application was stopped)",
    95: "uncontained ECC error (the GPU needs a reset)",
    109: "context switch timeout",
    119: "GSP RPC timeout",
    120: "GSP error",
    154: "GPU recovery action needed (reset or reboot)",
}

# 'NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus.'
_XID_LINE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})[^)]*\): (\d{1,5})\b")
# 'NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.' (also printed without an Xid line on some drivers)
_FELL_OFF_LINE = re.compile(r"NVRM: GPU (?:at )?(?:PCI:)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})\S*:? "
                            r".*fallen off the bus")


@dataclass
class XidEvent:
    """One Xid: the GPU's index (None when its bus id matched no GPU), the Xid number, when yolotui saw it,
    where it was read (nvml or kernel log), and what it means."""

    gpu: int | None
    xid: int
    ts: float
    source: str
    meaning: str
    bus_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form."""
        return asdict(self)


def meaning(xid: int) -> str:
    """A few words for Xid `xid`."""
    return MEANINGS.get(int(xid), "see NVIDIA's Xid catalogue")


def parse_kernel_line(line: str, bus_to_index: dict[str, int], now: float | None = None) -> XidEvent | None:
    """The Xid a kernel-log line reports, or None; `bus_to_index` maps bus keys (board.bus_key) to GPU indices."""
    now = time.time() if now is None else now
    match = _XID_LINE.search(line)
    if match is not None:
        xid = sanity.whole(int(match.group(2)), sanity.XID)
        if xid is None:
            return None
        key = bus_key(match.group(1))
        return XidEvent(bus_to_index.get(key or ""), xid, now, "kernel log", meaning(xid), key)
    match = _FELL_OFF_LINE.search(line)
    if match is not None:
        key = bus_key(match.group(1))
        return XidEvent(bus_to_index.get(key or ""), FELL_OFF_XID, now, "kernel log", meaning(FELL_OFF_XID), key)
    return None


class KernelLog:
    """New lines of the kernel log since `start()`: /dev/kmsg records, or a log file's appended lines."""

    def __init__(self, kmsg: str = KMSG, files: Iterable[str] = KERNEL_LOGS) -> None:
        self.kmsg_path = kmsg
        self.file_paths = list(files)
        self.fd: int | None = None
        self.path: str | None = None
        self.kind: str | None = None  # 'kmsg' or 'file'
        self.offset = 0
        self.inode: int | None = None
        self._partial = b""

    def start(self) -> bool:
        """Open the first readable source at its end; False when none is readable."""
        try:
            fd = os.open(self.kmsg_path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            fd = None
        if fd is not None:
            try:
                os.lseek(fd, 0, os.SEEK_END)
                os.read(fd, 8192)  # a readable /dev/kmsg answers EAGAIN at its end; a refused one raises here
            except BlockingIOError:
                pass
            except OSError:
                os.close(fd)
                fd = None
        if fd is not None:
            self.fd, self.path, self.kind = fd, self.kmsg_path, "kmsg"
            return True
        for path in self.file_paths:
            try:
                with open(path, "rb") as handle:
                    stat = os.fstat(handle.fileno())
                    handle.read(1)
            except OSError:
                continue
            self.path, self.kind, self.offset, self.inode = path, "file", stat.st_size, stat.st_ino
            return True
        return False

    def lines(self) -> list[str]:
        """The lines written since the last call (at most READ_LIMIT bytes of them)."""
        if self.kind == "kmsg":
            return self._kmsg_lines()
        if self.kind == "file":
            return self._file_lines()
        return []

    def _kmsg_lines(self) -> list[str]:
        out: list[str] = []
        read = 0
        while read < READ_LIMIT and self.fd is not None:
            try:
                record = os.read(self.fd, 8192)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # records were overwritten before we read them: go on
                    continue
                break
            if not record:
                break
            read += len(record)
            text = record.decode("utf-8", "replace")
            out.append(text.split(";", 1)[1] if ";" in text else text)
        return out

    def _file_lines(self) -> list[str]:
        try:
            with open(self.path or "", "rb") as handle:
                stat = os.fstat(handle.fileno())
                if stat.st_ino != self.inode or stat.st_size < self.offset:  # rotated or truncated
                    self.inode, self.offset, self._partial = stat.st_ino, 0, b""
                handle.seek(self.offset)
                data = handle.read(READ_LIMIT)
        except OSError:
            return []
        self.offset += len(data)
        data = self._partial + data
        end = data.rfind(b"\n") + 1
        self._partial = data[end:][-4096:]  # a line still being written waits for its newline
        return data[:end].decode("utf-8", "replace").splitlines()

    def close(self) -> None:
        """Close /dev/kmsg (safe to call twice)."""
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None


class XidWatcher:
    """Xids from NVML events where possible, else from the kernel log (see the module docstring).

    `call` is the guarded NVML caller (telemetry.guard.TimedCaller.call); it raises on NVML errors and on
    readings over the time limit.
    """

    def __init__(self, nvml: Any, call: Callable[..., Any], kernel_log: KernelLog | None = None) -> None:
        self.nvml = nvml
        self.call = call
        self.kernel_log = kernel_log if kernel_log is not None else KernelLog()
        self.event_set: Any = None
        self.source: str | None = None  # 'nvml', 'kernel log' or None (no source)
        self.bus_to_index: dict[str, int] = {}

    def start(self, handles: dict[int, Any], bus_ids: dict[int, str | None]) -> str | None:
        """Register for Xid events on every GPU in `handles` ({index: handle}); else open the kernel log.
        Returns the source used, or None."""
        self.bus_to_index = {key: index for index, bus in bus_ids.items() if (key := bus_key(bus))}
        create = getattr(self.nvml, "nvmlEventSetCreate", None)
        register = getattr(self.nvml, "nvmlDeviceRegisterEvents", None)
        if create is not None and register is not None and handles:
            try:
                event_set = self.call(create)
            except Exception:  # noqa: BLE001 - NVMLError, a timeout, garbage: no events then
                event_set = None
            registered = 0
            for handle in handles.values():
                if event_set is None:
                    break
                try:
                    self.call(register, handle, getattr(self.nvml, "nvmlEventTypeXidCriticalError", XID_EVENT_TYPE),
                              event_set)
                    registered += 1
                except Exception:  # noqa: BLE001 - not supported on this GPU
                    continue
            if registered:
                self.event_set, self.source = event_set, "nvml"
                return self.source
            if event_set is not None:
                self._free(event_set)
        if self.kernel_log.start():
            self.source = "kernel log"
        return self.source

    def update_bus_ids(self, bus_ids: dict[int, str | None]) -> None:
        """Learn GPUs' bus ids (for kernel-log lines) from a later sample."""
        for index, bus in bus_ids.items():
            key = bus_key(bus)
            if key:
                self.bus_to_index[key] = index

    def poll(self) -> list[XidEvent]:
        """The Xids seen since the last poll (at most MAX_EVENTS_PER_POLL)."""
        if self.source == "nvml":
            return self._nvml_events()
        if self.source == "kernel log":
            events = []
            now = time.time()
            for line in self.kernel_log.lines():
                event = parse_kernel_line(line, self.bus_to_index, now)
                if event is not None and len(events) < MAX_EVENTS_PER_POLL:
                    events.append(event)
            return events
        return []

    def _nvml_events(self) -> list[XidEvent]:
        wait = getattr(self.nvml, "nvmlEventSetWait_v2", None) or getattr(self.nvml, "nvmlEventSetWait", None)
        if wait is None:
            return []
        events: list[XidEvent] = []
        for _ in range(MAX_EVENTS_PER_POLL):
            try:
                data = self.call(wait, self.event_set, 0)
            except Exception:  # noqa: BLE001 - NVML_ERROR_TIMEOUT (nothing waiting), or any other failure
                break
            if not int(getattr(data, "eventType", 0) or 0) & XID_EVENT_TYPE:
                continue
            xid = sanity.whole(getattr(data, "eventData", None), sanity.XID)
            if xid is None:
                continue
            index = None
            get_index = getattr(self.nvml, "nvmlDeviceGetIndex", None)
            if get_index is not None:
                try:
                    index = sanity.whole(self.call(get_index, getattr(data, "device", None)), (0.0, 1024.0))
                except Exception:  # noqa: BLE001 - the GPU may be the one that is gone
                    index = None
            events.append(XidEvent(index, xid, time.time(), "nvml", meaning(xid)))
        return events

    def _free(self, event_set: Any) -> None:
        free = getattr(self.nvml, "nvmlEventSetFree", None)
        if free is not None:
            try:
                self.call(free, event_set)
            except Exception:  # noqa: BLE001 - nothing more to do
                pass

    def close(self) -> None:
        """Free the event set and close the kernel log."""
        if self.event_set is not None:
            self._free(self.event_set)
            self.event_set = None
        self.kernel_log.close()
