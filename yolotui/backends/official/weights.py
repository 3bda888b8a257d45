"""Reading the weights of an official YOLOv9 checkpoint without running any code from it.

Official .pt files (train_dual.py, the released yolov9-*.pt) pickle whole model objects
(`models.yolo.DetectionModel`, `models.common.RepNCSPELAN4`, torch.nn layers ...). `torch.load(weights_only=True)`
refuses them, and a plain `torch.load` would import and call whatever the file names. Here the pickle is walked
by the same symbolic reader yolotui.health uses (yolotui.health.pickle_scan: nothing is imported or called),
and the symbols are then turned into data under an allow-list: tensor rebuilds read their bytes from the
checkpoint's zip, OrderedDict/set/bytes become themselves, and an object created the pickle's NEWOBJ way (a
class's `__new__` plus its recorded state, how nn.Module pickles) becomes an inert `Recorded` holding that
state. nn.Module records hold `_parameters`, `_buffers` and `_modules`, which are walked to a flat state dict
with the official key names (`model.<i>....`). Any other call (a REDUCE of `os.system`, `builtins.eval` ...)
fails closed with a UserError naming the file; only a few data-only constructors (numpy arrays and scalars,
pathlib paths, which train_dual.py checkpoints hold in `best_fitness` or `opt`) are allowed, and they too only
record their arguments.

As the official code does (`ckpt.get('ema') or ckpt['model']`), the EMA model is used when present.
"""

from __future__ import annotations

import _compat_pickle
import pickle
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from yolotui.errors import UserError
from yolotui.health.pickle_scan import Call, Global, PersistentRef, PickleScanError, scan_pickle

# Names whose call merely records its arguments (data-only constructors found in official checkpoints).
_RECORDED_CALLS = frozenset({
    "numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct",
    "numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar", "numpy.dtype",
    "pathlib.Path", "pathlib.PosixPath", "pathlib.WindowsPath", "pathlib.PurePosixPath",
    "pathlib.PureWindowsPath",
    "ultralytics.utils.IterableSimpleNamespace",  # an ultralytics model's `args` (plain values)
})
_TENSOR_REBUILDS = frozenset({"torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_tensor"})
_PARAMETER_REBUILDS = frozenset({"torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state"})
_STORAGE_DTYPES = {
    "FloatStorage": torch.float32, "DoubleStorage": torch.float64, "HalfStorage": torch.float16,
    "BFloat16Storage": torch.bfloat16, "LongStorage": torch.int64, "IntStorage": torch.int32,
    "ShortStorage": torch.int16, "CharStorage": torch.int8, "ByteStorage": torch.uint8, "BoolStorage": torch.bool,
}
_VALUES: dict[str, Any] = {f"torch.{name}": getattr(torch, name) for name in (
    "float16", "float32", "float64", "bfloat16", "half", "float", "double", "int8", "int16", "int32", "int64",
    "uint8", "bool", "long", "int")}
MAX_PICKLE_BYTES = 512 * 2**20  # data.pkl of the largest official model is a few hundred kB


class CodeRefused(Exception):
    """The pickle tries to call something that is not on the allow-list."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


@dataclass(eq=False)
class Recorded:
    """An inert stand-in for an object of a class outside the allow-list: its name, arguments and state."""

    name: str
    args: Any = ()
    state: Any = None

    @property
    def stub_dict(self) -> dict[str, Any]:
        """The recorded instance dict (BUILD may give `dict` or `(dict, slots)`)."""
        state = self.state
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], dict):
            state = state[0]
        return state if isinstance(state, dict) else {}

    def __repr__(self) -> str:
        return f"<recorded {self.name}>"


def _qualified(ref: Any) -> str:
    """'module.name' of a Global, with Python 2 spellings mapped (as pickle does, importing nothing)."""
    if not isinstance(ref, Global):
        raise CodeRefused(f"a call of {type(ref).__name__}")
    module, name = ref.module, ref.name
    if (module, name) in _compat_pickle.NAME_MAPPING:
        module, name = _compat_pickle.NAME_MAPPING[(module, name)]
    module = _compat_pickle.IMPORT_MAPPING.get(module, module)
    return f"{module}.{name}"


class _Materialiser:
    """Turns pickle_scan's symbols into data: tensors from the zip's storages, records for objects."""

    def __init__(self, archive: zipfile.ZipFile | None, prefix: str) -> None:
        self.archive, self.prefix = archive, prefix
        self.storages: dict[str, torch.Tensor] = {}
        self.done: dict[int, Any] = {}

    def storage(self, ref: Any) -> torch.Tensor:
        pid = ref.pid if isinstance(ref, PersistentRef) else None
        if not (isinstance(pid, tuple) and len(pid) >= 3 and pid[0] == "storage"):
            raise ValueError(f"unexpected persistent id {pid!r}")
        kind = pid[1].name if isinstance(pid[1], Global) else str(pid[1])
        dtype = _STORAGE_DTYPES.get(kind)
        if dtype is None:
            raise ValueError(f"unsupported storage type {kind}")
        key = str(pid[2])
        if key not in self.storages:
            if self.archive is None:
                raise ValueError("tensor data outside a torch zip checkpoint")
            data = bytearray(self.archive.read(f"{self.prefix}/data/{key}"))
            self.storages[key] = (torch.frombuffer(data, dtype=dtype) if data else torch.empty(0, dtype=dtype))
        return self.storages[key]

    def tensor(self, args: Any) -> torch.Tensor:
        storage, offset, size, stride = (tuple(args) + (None,) * 4)[:4]
        flat = self.storage(storage)
        size, stride = tuple(int(v) for v in size), tuple(int(v) for v in stride)
        return torch.as_strided(flat, size, stride, int(offset))

    def value(self, obj: Any) -> Any:
        key = id(obj)
        if key in self.done:
            return self.done[key]
        if isinstance(obj, dict):
            out: Any = {}
            self.done[key] = out
            out.update({k: self.value(v) for k, v in obj.items()})
            return out
        if isinstance(obj, list):
            out = []
            self.done[key] = out
            out.extend(self.value(v) for v in obj)
            return out
        if isinstance(obj, tuple):
            return tuple(self.value(v) for v in obj)
        if isinstance(obj, (set, frozenset)):
            return type(obj)(self.value(v) for v in obj)
        if isinstance(obj, Global):
            name = _qualified(obj)
            if name in _VALUES:
                return _VALUES[name]
            return Recorded(name)
        if isinstance(obj, PersistentRef):
            raise ValueError("a storage outside a tensor")
        if isinstance(obj, Call):
            result = self.call(obj)
            self.done[key] = result
            return result
        return obj

    def call(self, call: Call) -> Any:
        name = _qualified(call.func)
        args = call.args if isinstance(call.args, tuple) else (call.args,)
        if call.how == "new":  # cls.__new__(cls) and its state: how nn.Module (and other objects) pickle
            record = Recorded(name)
            self.done[id(call)] = record
            record.state = self.value(call.state)
            return record
        if name in _TENSOR_REBUILDS:
            return self.tensor(args)
        if name in _PARAMETER_REBUILDS:
            data = self.value(args[0]) if args else None
            if not isinstance(data, torch.Tensor):
                raise CodeRefused(f"{name}(non-tensor)")
            return data
        if name == "torch._tensor._rebuild_from_type_v2":
            func, new_type = (args + (None, None))[:2]
            inner = args[2] if len(args) > 2 else ()
            if _qualified(new_type) not in ("torch.Tensor", "torch.nn.parameter.Parameter") or \
                    _qualified(func) not in _TENSOR_REBUILDS | _PARAMETER_REBUILDS:
                raise CodeRefused(f"{name}({new_type})")
            return self.call(Call(func, inner))
        if name == "collections.OrderedDict":
            out = dict(self.value(args[0])) if args and args[0] else {}
            pairs = self.value(call.items)
            out.update(zip(pairs[::2], pairs[1::2]))
            return out
        if name in ("builtins.set", "builtins.frozenset"):
            items = self.value(args[0]) if args else ()
            return (set if name.endswith(".set") else frozenset)(items)
        if name == "builtins.bytearray":
            return bytearray(self.value(args[0]) if args else b"")
        if name == "_codecs.encode":
            text, encoding = (tuple(self.value(a) for a in args) + ("utf-8",))[:2]
            if not isinstance(text, str) or str(encoding).lower().replace("-", "") not in ("latin1", "utf8"):
                raise CodeRefused(f"_codecs.encode(..., {encoding!r})")
            return text.encode(encoding)
        if name == "copyreg._reconstructor":
            cls = args[0] if args else None
            record = Recorded(_qualified(cls))
            record.state = self.value(call.state)
            return record
        if name in ("torch.Size",):
            return tuple(self.value(args[0])) if args else ()
        if name == "torch.device":
            return str(self.value(args[0])) if args else "cpu"
        if name in _RECORDED_CALLS:
            return Recorded(name, self.value(args), self.value(call.state))
        raise CodeRefused(name)


@dataclass
class OfficialWeights:
    """What an official checkpoint holds that yolotui can use."""

    path: Path
    state: dict[str, torch.Tensor]  # flat state dict, official key names, float tensors
    source: str  # 'ema' or 'model' (or 'state_dict' for a bare mapping of tensors)
    model_class: str  # e.g. 'models.yolo.DetectionModel'
    nc: int | None = None
    names: list[str] | None = None
    yaml: dict[str, Any] | None = None  # the model's config dict, when the pickled model kept it
    epoch: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def looks_official(path: str | Path) -> bool:
    """True when the file is a torch zip whose pickle names the official repository's model classes."""
    try:
        with zipfile.ZipFile(path) as archive:
            pickle_name = next((n for n in archive.namelist() if n.endswith("data.pkl")), None)
            if pickle_name is None:
                return False
            data = archive.read(pickle_name)
    except (OSError, zipfile.BadZipFile):
        return False
    return b"models.yolo" in data or b"models.common" in data


def _read_pickle(path: Path) -> tuple[bytes, zipfile.ZipFile | None, str]:
    """(data.pkl bytes, the open zip or None for a raw pickle, the zip's record prefix)."""
    if zipfile.is_zipfile(path):
        archive = zipfile.ZipFile(path)
        name = next((n for n in archive.namelist() if n.endswith("/data.pkl") or n == "data.pkl"), None)
        if name is None:
            archive.close()
            raise ValueError("no data.pkl in the zip: not a torch checkpoint")
        if archive.getinfo(name).file_size > MAX_PICKLE_BYTES:
            archive.close()
            raise ValueError(f"its pickle is over {MAX_PICKLE_BYTES >> 20} MiB")
        return archive.read(name), archive, name.rpartition("/")[0]
    if path.stat().st_size > MAX_PICKLE_BYTES:
        raise ValueError(f"over {MAX_PICKLE_BYTES >> 20} MiB and not a torch zip")
    return path.read_bytes(), None, ""


def load_recorded(path: str | Path) -> Any:
    """The checkpoint's object graph: tensors, plain data, and a `Recorded` for every object of another class.

    UserError naming the file when the pickle tries to call something (it is refused, never run) or cannot
    be read.
    """
    path = Path(path)
    archive = None
    try:
        data, archive, prefix = _read_pickle(path)
        return _Materialiser(archive, prefix).value(scan_pickle(data).value)
    except CodeRefused as exc:
        raise UserError(f"--weights {path}: refused: its pickle tries to call {exc.name}, which a checkpoint "
                        "has no reason to do; nothing from it was run. Use a checkpoint from a trusted "
                        "source") from None
    except (PickleScanError, RuntimeError, EOFError, OSError, zipfile.BadZipFile, AttributeError, TypeError,
            ValueError, KeyError, IndexError, RecursionError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:160]
        raise UserError(f"--weights {path}: cannot read it as a checkpoint ({first})") from None
    finally:
        if archive is not None:
            archive.close()


def is_module(obj: Any) -> bool:
    """True for a recorded nn.Module: a stub whose state holds _parameters and _modules."""
    if not isinstance(obj, Recorded):
        return False
    state = obj.stub_dict
    return isinstance(state.get("_parameters"), Mapping) and isinstance(state.get("_modules"), Mapping)


def module_state_dict(module: Recorded, prefix: str = "") -> dict[str, torch.Tensor]:
    """The flat state dict of a recorded module, as `nn.Module.state_dict()` names it (persistent buffers)."""
    out: dict[str, torch.Tensor] = {}
    _collect(module, prefix, out)
    return out


def _collect(module: Recorded, prefix: str, out: dict[str, torch.Tensor]) -> None:
    state = module.stub_dict
    for name, value in dict(state.get("_parameters") or {}).items():
        if value is not None:
            out[prefix + str(name)] = _tensor(value, prefix + str(name))
    transient = state.get("_non_persistent_buffers_set") or set()
    for name, value in dict(state.get("_buffers") or {}).items():
        if value is not None and name not in transient:
            out[prefix + str(name)] = _tensor(value, prefix + str(name))
    for name, child in dict(state.get("_modules") or {}).items():
        if child is None:
            continue
        if not is_module(child):
            raise ValueError(f"sub-module {prefix}{name} is not a module")
        _collect(child, f"{prefix}{name}.", out)


def _tensor(value: Any, key: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{key} is not a tensor")
    return value.detach().float() if value.is_floating_point() else value.detach()


def _plain(value: Any) -> Any:
    """Plain Python data (dicts, lists, scalars) from a recorded value; anything else becomes its repr."""
    if isinstance(value, Mapping):
        return {str(k) if not isinstance(k, (int, float, bool)) else k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def _names(value: Any, nc: int | None) -> list[str] | None:
    if isinstance(value, Mapping):
        count = nc if nc is not None else len(value)
        return [str(value.get(i, value.get(str(i), i))) for i in range(count)]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return None


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def read_official(path: str | Path) -> OfficialWeights:
    """Read an official YOLOv9 checkpoint's weights (EMA when present, else model) without running its code.

    Returns the flat state dict with official key names, plus nc, names, the model yaml dict and the epoch
    when the checkpoint holds them. UserError naming the file on a refused or unusable checkpoint.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"--weights {path}: file not found; give the path of a .pt checkpoint")
    ckpt = load_recorded(path)
    top: Mapping[str, Any] = ckpt if isinstance(ckpt, Mapping) else {"model": ckpt}
    picked, source = (top.get("ema"), "ema") if top.get("ema") is not None else (top.get("model"), "model")
    try:
        if is_module(picked):
            state = module_state_dict(picked)
            attrs = picked.stub_dict
            model_class = picked.name
        elif isinstance(picked, Mapping) and picked and all(isinstance(v, torch.Tensor) for v in picked.values()):
            state = {str(k): _tensor(v, str(k)) for k, v in picked.items()}
            attrs, model_class, source = {}, "state_dict", "state_dict"
        else:
            raise ValueError("it holds no 'ema' or 'model' entry with weights")
    except ValueError as exc:
        raise UserError(f"--weights {path}: not a usable YOLOv9 checkpoint ({exc})") from None
    if not state:
        raise UserError(f"--weights {path}: its model holds no weights")
    yaml = _plain(attrs.get("yaml")) if isinstance(attrs.get("yaml"), Mapping) else None
    nc = _int_or_none(attrs.get("nc"))
    if nc is None and yaml is not None:
        nc = _int_or_none(yaml.get("nc"))
    names = _names(attrs.get("names"), nc)
    if names is not None and nc is not None and len(names) != nc:
        names = None
    epoch = _int_or_none(top.get("epoch"))
    return OfficialWeights(path=path, state=state, source=source, model_class=model_class, nc=nc, names=names,
                           yaml=yaml, epoch=epoch,
                           extra={"date": top.get("date") if isinstance(top.get("date"), str) else None})


def as_source_checkpoint(weights: OfficialWeights) -> dict[str, Any]:
    """The official weights shaped like the parts of a yolotui checkpoint that weight transfer reads."""
    return {"format": "official", "model_yaml": weights.yaml, "nc": weights.nc, "names": weights.names,
            "ema": weights.state, "model": weights.state, "epoch": weights.epoch, "official": True}


def load_weights_source(path: str | Path) -> dict[str, Any]:
    """A --weights file for training: a yolotui checkpoint (weights_only) or an official one (read inertly).

    Returns a dict with at least `model_yaml` (None when an official model did not keep it), `nc`, `names`
    and `ema`/`model` state dicts; an official source also has `official: True`. UserError naming the file
    when neither reader can use it.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"--weights {path}: file not found; give the path of a .pt checkpoint")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        return as_source_checkpoint(read_official(path))
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:160]
        raise UserError(f"--weights {path}: cannot read the checkpoint ({first}); it may be truncated") from None
    if isinstance(ckpt, Mapping) and isinstance(ckpt.get("ema") or ckpt.get("model"), Mapping):
        return dict(ckpt)
    if isinstance(ckpt, Mapping) and ckpt and all(isinstance(v, torch.Tensor) for v in ckpt.values()):
        return {"model_yaml": None, "nc": None, "names": None, "model": dict(ckpt), "ema": None}
    raise UserError(f"--weights {path}: holds no model weights (expected a yolotui or YOLOv9 checkpoint)")


__all__ = ["OfficialWeights", "load_weights_source", "read_official", "looks_official", "load_recorded", "module_state_dict",
           "as_source_checkpoint", "Recorded", "CodeRefused"]
