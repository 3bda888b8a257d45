"""One copy of a snapshot to a store, in the order that keeps the mirror restorable at every instant.

1. the small files (run.yaml, opt.yaml, hyp.yaml, results.csv, events.jsonl);
2. each changed checkpoint's manifest as `weights/NAME.pt.json.next`, then the checkpoint itself;
3. `commit`: every uploaded checkpoint's stored sha256 is checked against its manifest, then the pending
   manifests are renamed into place (the manifest last, as the trainer does it);
4. status.json.

A copy cut short anywhere leaves a folder that yolotui.mirror.pull settles as runs.manifest.reconcile settles
a run folder: a pending manifest that matches the checkpoint in place completes it, else it is dropped and
the previous checkpoint and manifest stand. A checkpoint whose manifest at the target already names the same
bytes is not sent again (best.pt rarely changes; the final copy after a stop sends only what is new).
A folder that holds another run of the same name (status.json's `started`, the run's first start, differs) is
never overwritten. `store_for(target, name)` is the store of one run at a target (yolotui.mirror.store_local, store_rsync,
store_fsspec).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from yolotui.mirror.snapshot import Snapshot, describes, read_manifest
from yolotui.mirror.stores import Check, CopyError, Store
from yolotui.mirror.target import FSSPEC, LOCAL, RSYNC, Target
from yolotui.runs.layout import STATUS_JSON


@dataclass
class PushReport:
    """What a copy did: checkpoints sent and skipped (unchanged), bytes sent, and the last.pt it left there."""

    sent: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    bytes: int = 0
    epoch: int | None = None
    step: int | None = None


def _already_there(store: Store, manifest_rel: str, sha256: str, size: int) -> bool:
    raw = store.read_small(manifest_rel)
    if not raw:
        return False
    try:
        return describes(json.loads(raw), sha256, size)
    except ValueError:
        return False


def _started(raw: bytes | None) -> float | None:
    """status.json's `started` (the run's first start, kept by every resume and restore): the run's identity."""
    try:
        value = json.loads(raw).get("started") if raw else None
    except (ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def refuse_another_run(snapshot: Snapshot, store: Store) -> None:
    """CopyError when TARGET/RUN_NAME holds a different run of the same name (two `exp` runs of two projects)."""
    if not snapshot.status:
        return
    staged = read_manifest(snapshot.stage / STATUS_JSON)  # a bounded read of a small JSON file
    ours = _started(staged[1] if staged is not None else None)
    theirs = _started(store.read_small(STATUS_JSON))
    if ours is not None and theirs is not None and abs(ours - theirs) > 1e-3:
        import time

        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(theirs))
        raise CopyError(f"{store.where} holds another run of this name (first started {when}); mirror this one "
                        "under another --name or to another --mirror target")


def push(snapshot: Snapshot, store: Store) -> PushReport:
    """Copy `snapshot` to `store` (see the module docstring); CopyError (one line) when a step fails."""
    report = PushReport()
    refuse_another_run(snapshot, store)
    store.prepare()
    store.put(snapshot.stage, list(snapshot.small))
    changed = []
    for staged in snapshot.checkpoints:
        if _already_there(store, staged.manifest_rel, staged.sha256, staged.bytes):
            report.unchanged.append(staged.name)
        else:
            changed.append(staged)
    store.put(snapshot.stage, [c.pending_rel for c in changed])
    store.put(snapshot.stage, [c.rel for c in changed])
    store.commit([Check(c.rel, c.sha256, c.pending_rel, c.manifest_rel) for c in changed])
    report.sent = [c.name for c in changed]
    report.bytes = sum(c.bytes for c in changed)
    if snapshot.status:
        store.put(snapshot.stage, [STATUS_JSON])
    last = snapshot.last()
    if last is not None:
        epoch, step = last.manifest.get("epoch"), last.manifest.get("step")
        report.epoch = epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None
        report.step = step if isinstance(step, int) and not isinstance(step, bool) else None
    return report


def store_for(target: Target, name: str) -> Store:
    """The store of run `name` at `target`."""
    if target.kind == LOCAL:
        from pathlib import Path

        from yolotui.mirror.store_local import LocalStore

        return LocalStore(Path(target.join(name)))
    if target.kind == RSYNC:
        from yolotui.mirror.store_rsync import RsyncStore

        return RsyncStore(target, name)
    if target.kind == FSSPEC:
        from yolotui.mirror.store_fsspec import FsspecStore

        return FsspecStore(target, name)
    raise CopyError(f"unknown mirror target kind {target.kind!r}")
