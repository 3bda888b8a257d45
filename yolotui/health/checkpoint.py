"""Inspect a checkpoint without torch: container, pickle keys and small values, manifest.

`inspect_checkpoint(path)` never unpickles: the zip container is checked member by member (CRC,
truncation), `data.pkl` is walked opcode by opcode (`pickle_scan`), and only plain values are read
from the top-level dict (epoch, step, epochs, best_fitness, opt, hyp, versions ...). Tensors stay
symbols; their storages are checked to exist in the archive. When `<name>.pt.json` sits beside the
file, its bytes, sha256, epoch and step are compared.

Three layouts are understood: yolotui's (`format: 'yolotui-1'`, a plain dict of tensors and values,
`epoch` = epochs completed), the official YOLOv9 one (`epoch` = last completed 0-based index,
-1 once finished and stripped of its optimizer; `model`/`ema` are pickled classes; total epochs in
`opt['epochs']`) and ultralytics' (yolotui/health/ultralytics_layout.py: the official epoch rule, total epochs
in `train_args['epochs']`, `version`, `date`).
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from yolotui.health import ultralytics_layout
from yolotui.health.container import ContainerError, has_zip_end_record, looks_like_zip, read_container
from yolotui.health.pickle_scan import Call, Global, PersistentRef, PickleScanError, scan_pickle

YOLOTUI = "yolotui"
OFFICIAL = "official"
ULTRALYTICS = "ultralytics"
UNKNOWN = "unknown"

# Module roots whose callables would run commands, touch files or load code if unpickled.
DANGEROUS_MODULES = frozenset({
    "os", "posix", "nt", "subprocess", "sys", "shutil", "socket", "importlib", "runpy", "pickle", "_pickle",
    "marshal", "ctypes", "pty", "webbrowser", "code", "commands", "pdb", "platform", "signal", "multiprocessing",
    "threading", "asyncio", "urllib", "http", "requests", "tempfile", "glob", "pathlib", "io", "types",
})
DANGEROUS_BUILTINS = frozenset({
    "eval", "exec", "compile", "__import__", "getattr", "setattr", "delattr", "open", "input", "breakpoint",
    "globals", "locals", "vars", "apply", "execfile", "file", "reload",
})
# Globals a weights-only checkpoint may reference (tensor rebuilding, storages, OrderedDict, dtypes).
TENSOR_GLOBAL_PREFIXES = ("torch._utils._rebuild", "torch.storage.", "collections.OrderedDict", "torch.Size",
                          "torch._tensor._rebuild", "_codecs.encode", "torch.device", "torch.float", "torch.bfloat",
                          "torch.half", "torch.int", "torch.uint", "torch.bool", "torch.long", "torch.double",
                          "torch.complex", "builtins.set", "builtins.frozenset", "builtins.bytearray",
                          "__builtin__.set", "torch.nn.parameter.Parameter",
                          "torch.torch_version.TorchVersion")
STORAGE_ITEM_BYTES = {
    "FloatStorage": 4, "DoubleStorage": 8, "HalfStorage": 2, "BFloat16Storage": 2, "LongStorage": 8,
    "IntStorage": 4, "ShortStorage": 2, "CharStorage": 1, "ByteStorage": 1, "BoolStorage": 1,
    "UntypedStorage": 1, "ComplexFloatStorage": 8, "ComplexDoubleStorage": 16,
}
LEGACY_TORCH_MAGIC = 0x1950A86A20F9469CFC6C
MAX_PICKLE_BYTES = 512 * 1024 * 1024  # data.pkl of real checkpoints is KBs to a few MB


@dataclass
class CheckpointInfo:
    """What a scan of one checkpoint found; None where the file does not say (or could not be read)."""

    path: str
    size: int = 0
    mtime: float | None = None
    kind: str = UNKNOWN  # 'yolotui' | 'official' | 'unknown'
    keys: list[str] = field(default_factory=list)
    epoch: int | None = None  # as stored (yolotui: epochs completed; official: last index, -1 finished)
    step: int | None = None
    total_epochs: int | None = None
    best_fitness: float | None = None
    has_optimizer: bool = False
    has_ema: bool = False
    has_scheduler: bool = False
    crc_ok: bool | None = None  # None: no zip container to check
    manifest_ok: bool | None = None  # None: no manifest beside the file
    error: str | None = None  # why the file could not be read as a checkpoint (torn, bad CRC, not a pickle)
    # Further fields:
    exists: bool = True
    container: str = "none"  # 'zip' | 'pickle' | 'none'
    torn: bool = False  # damaged container or pickle (as opposed to a readable file that is not a checkpoint)
    format: str | None = None
    epochs_done: int | None = None  # epochs completed, the same meaning for both layouts
    bad_members: list[str] = field(default_factory=list)
    manifest: dict[str, Any] | None = None
    manifest_problems: list[str] = field(default_factory=list)
    manifest_stale: bool = False  # manifest older than the checkpoint: written between the two replaces
    pickled_classes: list[str] = field(default_factory=list)  # globals beyond tensor rebuilding
    unsafe_globals: list[str] = field(default_factory=list)  # globals that would run code if unpickled
    top_level: str | None = None  # type of the pickle's top-level value when it is not a dict
    opt: dict[str, Any] | None = None
    hyp: dict[str, Any] | None = None
    versions: dict[str, Any] | None = None
    date: str | None = None
    nc: int | None = None
    names: list[Any] | None = None
    replaced: bool = False  # the file was replaced while being read

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form."""
        return asdict(self)


def manifest_path(checkpoint: Path) -> Path:
    """The manifest beside a checkpoint: `last.pt` -> `last.pt.json`."""
    checkpoint = Path(checkpoint)
    return checkpoint.with_name(checkpoint.name + ".json")


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return digest.hexdigest()
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view, memoryview(view) as whole:
            step = 16 * 1024 * 1024
            for offset in range(0, len(whole), step):
                with whole[offset : offset + step] as chunk:
                    digest.update(chunk)
    return digest.hexdigest()


def is_unsafe_global(ref: Global) -> bool:
    """True when unpickling would call something that can run commands, open files or import code."""
    root = ref.module.split(".")[0]
    if root in DANGEROUS_MODULES:
        return True
    return root in ("builtins", "__builtin__") and ref.name in DANGEROUS_BUILTINS


def _is_tensor_global(ref: Global) -> bool:
    text = str(ref)
    if ref.module == "torch" and ref.name.endswith("Storage"):
        return True
    return text.startswith(TENSOR_GLOBAL_PREFIXES)


def _as_mapping(value: Any) -> dict[str, Any] | None:
    """A plain dict, or the state dict of a pickled object (argparse.Namespace); else None."""
    if isinstance(value, dict):
        return value
    if isinstance(value, Call) and isinstance(value.state, dict):
        return value.state
    return None


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float_or_none(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, Call):  # official best_fitness is a numpy scalar: read it from its raw bytes
        return _numpy_scalar(value)
    return None


def _numpy_scalar(value: Call) -> float | None:
    """The value of a pickled numpy float64/float32 scalar (numpy.core.multiarray.scalar(dtype, bytes))."""
    import struct

    if not (isinstance(value.func, Global) and value.func.name == "scalar" and isinstance(value.args, tuple)):
        return None
    raw = value.args[1] if len(value.args) > 1 else None
    if isinstance(raw, str):  # protocol 2 keeps bytes as latin-1 text via _codecs.encode
        raw = raw.encode("latin-1")
    if isinstance(raw, Call) and isinstance(raw.args, tuple) and raw.args and isinstance(raw.args[0], str):
        raw = raw.args[0].encode("latin-1")
    if isinstance(raw, bytes) and len(raw) in (4, 8):
        return struct.unpack("<d" if len(raw) == 8 else "<f", raw)[0]
    return None


def _check_storages(pids: list[Any], members: dict[str, int], prefix: str) -> list[str]:
    """Storages the pickle references that are missing from the archive or shorter than declared."""
    problems: list[str] = []
    base = f"{prefix}/data/" if prefix else "data/"
    for pid in pids:
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
            continue
        storage_type, key, numel = pid[1], str(pid[2]), pid[4]
        name = base + key
        if name not in members:
            problems.append(f"tensor storage {name} is missing from the archive")
            continue
        item = STORAGE_ITEM_BYTES.get(storage_type.name) if isinstance(storage_type, Global) else None
        if item and isinstance(numel, int) and members[name] < numel * item:
            problems.append(f"tensor storage {name} holds {members[name]} bytes, needs {numel * item}")
    return problems


def _read_manifest(info: CheckpointInfo, path: Path, verify_hash: bool) -> None:
    mpath = manifest_path(path)
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return
    except (OSError, ValueError) as exc:
        info.manifest_ok = False
        info.manifest_problems.append(f"manifest {mpath.name} is unreadable: {exc}")
        return
    if not isinstance(manifest, dict):
        info.manifest_ok = False
        info.manifest_problems.append(f"manifest {mpath.name} is not a JSON object")
        return
    info.manifest = manifest
    problems = info.manifest_problems
    if isinstance(manifest.get("bytes"), int) and manifest["bytes"] != info.size:
        problems.append(f"size is {info.size} bytes, manifest says {manifest['bytes']}")
    for key in ("epoch", "step"):
        have = getattr(info, key)
        if key in manifest and have is not None and manifest[key] != have:
            problems.append(f"{key} is {have}, manifest says {manifest[key]}")
    if verify_hash and isinstance(manifest.get("sha256"), str) and not problems:
        digest = file_sha256(path)
        if digest != manifest["sha256"].lower():
            problems.append(f"sha256 {digest[:12]}… differs from the manifest's {manifest['sha256'][:12]}…")
    info.manifest_ok = not problems
    if problems:
        try:
            info.manifest_stale = mpath.stat().st_mtime < (info.mtime or 0)
        except OSError:
            pass


def _fill_from_dict(info: CheckpointInfo, top: dict[Any, Any]) -> None:
    info.keys = [str(k) for k in top]
    fmt = top.get("format")
    info.format = fmt if isinstance(fmt, str) else None
    if info.format and info.format.startswith(YOLOTUI):
        info.kind = YOLOTUI
    elif ultralytics_layout.is_ultralytics(top):
        info.kind = ULTRALYTICS
    elif "model" in top and "epoch" in top:
        info.kind = OFFICIAL
    info.epoch = _int_or_none(top.get("epoch"))
    info.step = _int_or_none(top.get("step"))
    info.best_fitness = _float_or_none(top.get("best_fitness"))
    info.has_optimizer = top.get("optimizer") is not None
    info.has_ema = top.get("ema") is not None
    info.has_scheduler = top.get("scheduler") is not None
    opt = _as_mapping(top.get("opt" if info.kind != ULTRALYTICS else "train_args"))
    hyp = _as_mapping(top.get("hyp"))
    if hyp is None and opt is not None:
        hyp = _as_mapping(opt.get("hyp"))
    info.opt = plain(opt) if opt is not None else None
    info.hyp = plain(hyp) if hyp is not None else None
    versions = _as_mapping(top.get("versions"))
    info.versions = plain(versions) if versions is not None else None
    info.date = top.get("date") if isinstance(top.get("date"), str) else None
    info.nc = _int_or_none(top.get("nc"))
    names = top.get("names")
    info.names = plain(names) if isinstance(names, (list, dict)) else None
    total = _int_or_none(top.get("epochs")) if info.kind == YOLOTUI else None
    if total is None and opt is not None:
        total = _int_or_none(opt.get("epochs"))
    info.total_epochs = total
    if info.kind == OFFICIAL and info.epoch is not None:
        info.epochs_done = total if info.epoch == -1 else info.epoch + 1
    elif info.kind == ULTRALYTICS:
        ultralytics_layout.fill(info, top, total)
    else:
        info.epochs_done = info.epoch


def _scan_plain_pickle(info: CheckpointInfo, data: bytes) -> Any:
    """A file that is a bare pickle (not torch's zip): scan it, recognise torch's legacy format."""
    result = scan_pickle(data)
    if result.value == LEGACY_TORCH_MAGIC:
        info.error = "torch's legacy (pre-1.6) format: re-save it with a current torch to inspect it"
    return result


def inspect_checkpoint(path: Path, verify_hash: bool = True) -> CheckpointInfo:
    """Scan the checkpoint at `path` (never unpickling it) and compare it with its manifest.

    A file replaced while it was read (the trainer saved meanwhile) is read once more, fresh.
    """
    info = _inspect_once(Path(path), verify_hash)
    if info.replaced:
        info = _inspect_once(Path(path), verify_hash)
    return info


def _inspect_once(path: Path, verify_hash: bool) -> CheckpointInfo:
    info = CheckpointInfo(path=str(path))
    try:
        before = path.stat()
    except FileNotFoundError:
        info.exists = False
        info.error = "file not found"
        return info
    except OSError as exc:
        info.exists = False
        info.error = f"cannot read: {exc.strerror or exc}"
        return info
    info.size, info.mtime = before.st_size, before.st_mtime
    if before.st_size == 0:
        info.torn = True
        info.error = "empty file (a write that never completed)"
        _read_manifest(info, path, verify_hash=False)
        return info
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
    except OSError as exc:
        info.error = f"cannot read: {exc.strerror or exc}"
        return info
    result = None
    try:
        if looks_like_zip(head) or (head[:1] != b"\x80" and has_zip_end_record(path)):
            info.container = "zip"
            container = read_container(path)
            info.bad_members = list(container.bad_crc)
            info.crc_ok = not container.bad_crc
            if container.bad_crc:
                info.torn = True
                info.error = f"CRC mismatch in {', '.join(container.bad_crc[:3])}" + (
                    f" and {len(container.bad_crc) - 3} more" if len(container.bad_crc) > 3 else "")
            elif len(container.pickle_bytes) > MAX_PICKLE_BYTES:
                info.error = f"data.pkl is {len(container.pickle_bytes) / 1e6:.0f} MB: too large to be a checkpoint's"
            else:
                result = scan_pickle(container.pickle_bytes)
                missing = _check_storages(result.persistent_ids, container.members, container.prefix)
                if missing:
                    info.torn = True
                    info.bad_members = missing
                    info.error = missing[0]
        elif head[:1] == b"\x80":
            info.container = "pickle"
            if info.size > MAX_PICKLE_BYTES:
                info.error = "a bare pickle too large to scan: not a checkpoint yolotui can read"
            else:
                result = _scan_plain_pickle(info, path.read_bytes())
        else:
            info.error = "not a checkpoint: neither a torch zip archive nor a pickle"
    except ContainerError as exc:
        info.torn = True
        info.crc_ok = False
        info.error = str(exc)
        if "without data.pkl" in str(exc):  # a healthy zip of something else
            info.torn, info.crc_ok = False, True
    except PickleScanError as exc:
        info.torn = info.container == "zip"  # a zip whose CRCs pass but whose pickle is torn
        info.error = f"data.pkl: {exc}" if info.container == "zip" else f"not a readable pickle: {exc}"
    except (OSError, MemoryError) as exc:
        info.error = f"cannot read: {exc}"
    if result is not None:
        globals_seen = sorted(result.globals, key=str)
        info.unsafe_globals = [str(g) for g in globals_seen if is_unsafe_global(g)]
        info.pickled_classes = [str(g) for g in globals_seen if not _is_tensor_global(g) and not is_unsafe_global(g)]
        if isinstance(result.value, dict):
            _fill_from_dict(info, result.value)
        else:
            info.top_level = _describe(result.value)
    _read_manifest(info, path, verify_hash)
    try:
        after = path.stat()
    except OSError:
        return info
    if (after.st_ino, after.st_mtime_ns, after.st_size) != (before.st_ino, before.st_mtime_ns, before.st_size):
        info.replaced = True
    return info


def _describe(value: Any) -> str:
    if isinstance(value, Call):
        return f"a call to {value.func}"
    if isinstance(value, PersistentRef):
        return "a persistent reference"
    return type(value).__name__


def plain(value: Any, depth: int = 0) -> Any:
    """`value` as JSON-ready plain data: symbols become short descriptive strings, tensors their shape."""
    if depth > 20:
        return "..."
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, dict):
        return {str(k): plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v, depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((plain(v, depth + 1) for v in value), key=repr)
    if isinstance(value, Call):
        if value.func == Global("torch.torch_version", "TorchVersion") and isinstance(value.args, tuple) \
                and value.args and isinstance(value.args[0], str):
            return value.args[0]  # torch.__version__ is a str subclass
        if isinstance(value.func, Global) and value.func.name.startswith("_rebuild_tensor"):
            shape = value.args[2] if isinstance(value.args, tuple) and len(value.args) > 2 else None
            return f"<tensor {list(shape) if isinstance(shape, tuple) else '?'}>"
        return f"<{value.func}>"
    if isinstance(value, Global):
        return f"<{value}>"
    return f"<{type(value).__name__}>"
