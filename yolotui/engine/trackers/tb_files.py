"""TensorBoard event files of a run folder: read them (bounded, torn-tolerant) and cut them back to a checkpoint.

A trainer killed mid-epoch has written event records past its last checkpoint; the resumed trainer writes those
steps again. Before it opens its own writer, `prune` rewrites the folder's event files as one file holding only
what the checkpoint covers: per-epoch tags with step < the checkpoint's epoch, per-N-batches tags (BATCH_PREFIX)
with step < its global iteration, one hparams record, one file-version record, no duplicate (tag, step). So no
reader (TensorBoard, EventAccumulator, a pandas script) ever sees a step twice, and the curves continue.

The file format is TFRecord: uint64 length, uint32 masked CRC-32C of the length, the bytes, uint32 masked CRC of
the bytes; a record that is short, too long or fails its CRC ends that file's reading (a torn tail, or garbage).
The rewrite is atomic (temporary file, fsync, os.replace onto the first file's name), then the others go.
`set_aside` moves an earlier life's event files (a folder reused with --exist-ok) into its previous-* folder.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from yolotui.engine.trackers.base import BATCH_PREFIX

EVENT_FILE_PREFIX = "events.out.tfevents."
MAX_TOTAL_BYTES = 256 * 2**20  # more than this in one run folder: leave the files alone (TensorBoard's purge only)
MAX_RECORD_BYTES = 32 * 2**20
HPARAMS_PREFIX = "_hparams_/"


@dataclass
class PruneResult:
    """What the run folder's event files hold after `prune` (and how much was dropped)."""

    present: dict[str, set[int]] = field(default_factory=dict)  # tag -> steps
    has_hparams: bool = False
    kept: int = 0
    dropped: int = 0
    skipped: str | None = None  # why the files were left as they were (too big), else None


def event_files(folder: Path) -> list[Path]:
    """The folder's own event files (not its subfolders'), in TensorBoard's reading order (by name)."""
    try:
        names = sorted(n for n in os.listdir(folder) if n.startswith(EVENT_FILE_PREFIX) and not n.endswith(".tmp"))
    except OSError:
        return []
    return [Path(folder) / n for n in names if (Path(folder) / n).is_file() and not (Path(folder) / n).is_symlink()]


def _crc(data: bytes) -> int:
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    return int(masked_crc32c(data))


def iter_records(data: bytes) -> Iterator[bytes]:
    """Each whole TFRecord of `data` (framing included), stopping at the first torn or corrupt one."""
    offset, size = 0, len(data)
    while offset + 12 <= size:
        header = data[offset:offset + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", data[offset + 8:offset + 12])
        end = offset + 12 + length + 4
        if header_crc != _crc(header) or length > MAX_RECORD_BYTES or end > size:
            return
        body = data[offset + 12:offset + 12 + length]
        (body_crc,) = struct.unpack("<I", data[end - 4:end])
        if body_crc != _crc(body):
            return
        yield data[offset:end]
        offset = end


def record_body(record: bytes) -> bytes:
    """The serialized Event inside one framed record."""
    return record[12:-4]


def read_events(folder: Path) -> Iterator[tuple[Path, object]]:
    """(file, Event) for every readable event of the folder's own event files (a reading aid for tests and tools)."""
    from tensorboard.compat.proto import event_pb2

    for path in event_files(folder):
        try:
            data = _read_bounded(path, MAX_TOTAL_BYTES)
        except OSError:
            continue
        for record in iter_records(data):
            try:
                yield path, event_pb2.Event.FromString(record_body(record))
            except Exception:  # a record that is not an Event (DecodeError): skip it
                continue


def _read_bounded(path: Path, limit: int) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(limit)


def prune(folder: Path, epoch_limit: int, iteration_limit: int) -> PruneResult:
    """Cut the folder's event files back to (epoch_limit epochs, iteration_limit iterations) done; see above."""
    from tensorboard.compat.proto import event_pb2

    files = event_files(folder)
    result = PruneResult()
    if not files:
        return result
    total = 0
    for path in files:
        try:
            total += path.stat().st_size
        except OSError:
            continue
    if total > MAX_TOTAL_BYTES:
        result.skipped = f"{total // 2**20} MiB of event files: left as they are"
        result.has_hparams = True  # unknown: never add a second one
        return result
    kept: list[bytes] = []
    seen: set[tuple[str, int]] = set()
    file_version = False
    for path in files:
        try:
            data = _read_bounded(path, MAX_TOTAL_BYTES)
        except OSError:
            continue
        for record in iter_records(data):
            try:
                event = event_pb2.Event.FromString(record_body(record))
            except Exception:  # DecodeError: not an Event
                result.dropped += 1
                continue
            keep = True
            if event.HasField("file_version"):
                keep, file_version = not file_version, True
            elif event.HasField("session_log"):
                keep = False  # the resumed writer adds its own START at the resume step
            elif event.HasField("summary") and event.summary.value:
                tag, step = event.summary.value[0].tag, int(event.step)
                if tag.startswith(HPARAMS_PREFIX):
                    keep = (tag, 0) not in seen
                    result.has_hparams = True
                    step = 0
                else:
                    limit = iteration_limit if tag.startswith(BATCH_PREFIX) else epoch_limit
                    keep = step < limit and (tag, step) not in seen
                if keep:
                    seen.add((tag, step))
                    if not tag.startswith(HPARAMS_PREFIX):
                        result.present.setdefault(tag, set()).add(step)
            if keep:
                kept.append(record)
            else:
                result.dropped += 1
    result.kept = len(kept)
    if result.dropped:
        _rewrite(files, kept)
    return result


def _rewrite(files: list[Path], kept: list[bytes]) -> None:
    """Replace `files` with one file of `kept` records (under the first one's name), atomically; none if empty."""
    from yolotui.runs.atomic import atomic_open, fsync_dir

    target = files[0]
    if kept:
        with atomic_open(target, "wb") as handle:
            for record in kept:
                handle.write(record)
        others = files[1:]
    else:
        others = files
    for path in others:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
    fsync_dir(target.parent)


def set_aside(folder: Path) -> Path | None:
    """Move the folder's event files into its newest previous-* folder (where `--exist-ok` put the earlier
    run's logs; a new previous-<time> when there is none); returns where they went, None when there were none."""
    import time

    files = event_files(folder)
    if not files:
        return None
    earlier = sorted(p for p in Path(folder).glob("previous-*") if p.is_dir() and not p.is_symlink())
    target = earlier[-1] if earlier else Path(folder) / f"previous-{time.strftime('%Y%m%d-%H%M%S')}"
    target.mkdir(exist_ok=True)
    for path in files:
        os.replace(path, target / path.name)
    return target
