"""Reading the weights of an official YOLOv9 checkpoint without running any code from it.

Official .pt files (train_dual.py, the released yolov9-*.pt) pickle whole model objects
(`models.yolo.DetectionModel`, `models.common.RepNCSPELAN4`, torch.nn layers ...). `torch.load(weights_only=True)`
refuses them, and a plain `torch.load` would import and call whatever the file names. Here the pickle is read
with an unpickler whose `find_class` hands out real objects only for a small allow-list (tensor and storage
rebuilding, OrderedDict, set, dtypes) and an inert stub class for every other name. A stub records what the
pickle gives it (the state of a BUILD, the arguments of a NEWOBJ) and runs nothing: nn.Module pickles become
stubs whose recorded `__dict__` holds `_parameters`, `_buffers` and `_modules`, which are walked to a flat
state dict with the official key names (`model.<i>....`). Calling a stubbed name (a REDUCE of `os.system`,
`builtins.eval` ...) fails closed with a UserError naming the file; only a few data-only constructors (numpy
arrays and scalars, pathlib paths, which train_dual.py checkpoints hold in `best_fitness` or `opt`) may be
"called", and they too only record their arguments.

As the official code does (`ckpt.get('ema') or ckpt['model']`), the EMA model is used when present.
"""

from __future__ import annotations

import _compat_pickle
import collections
import pickle
import types
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from yolotui.errors import UserError

# Names whose call merely records its arguments (data-only constructors found in official checkpoints).
_RECORDED_CALLS = frozenset({
    "numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct",
    "numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar", "numpy.dtype",
    "pathlib.Path", "pathlib.PosixPath", "pathlib.WindowsPath", "pathlib.PurePosixPath",
    "pathlib.PureWindowsPath",
})


class CodeRefused(Exception):
    """The pickle tried to call something that is not on the allow-list."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class _StubMeta(type):
    """Metaclass of stub classes: calling a stub class (a pickle REDUCE) is refused unless it only records."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if not cls._stub_may_call:
            raise CodeRefused(cls._stub_name)
        return cls.__new__(cls, *args, **kwargs)


class Stub(metaclass=_StubMeta):
    """An inert stand-in for an object of a class outside the allow-list: it only records its state."""

    _stub_name = "?"
    _stub_may_call = False

    def __new__(cls, *args: Any, **kwargs: Any) -> Stub:
        obj = object.__new__(cls)
        obj.__dict__["stub_args"] = args
        obj.__dict__["stub_state"] = None
        return obj

    def __setstate__(self, state: Any) -> None:
        self.__dict__["stub_state"] = state

    @property
    def stub_dict(self) -> dict[str, Any]:
        """The recorded instance dict (BUILD may give `dict` or `(dict, slots)`)."""
        state = self.__dict__.get("stub_state")
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], dict):
            state = state[0]
        return state if isinstance(state, dict) else {}

    def __repr__(self) -> str:
        return f"<stub {self._stub_name}>"


_STUB_TYPES: dict[str, type] = {}


def _stub_type(qualified: str) -> type:
    """The (cached) stub class standing for the global `qualified`."""
    stub = _STUB_TYPES.get(qualified)
    if stub is None:
        short = qualified.rsplit(".", 1)[-1] or "Stub"
        stub = _StubMeta(short, (Stub,), {"_stub_name": qualified,
                                          "_stub_may_call": qualified in _RECORDED_CALLS})
        _STUB_TYPES[qualified] = stub
    return stub


def _no_hooks() -> collections.OrderedDict:
    return collections.OrderedDict()


def _rebuild_tensor_v2(storage: Any, offset: int, size: Any, stride: Any, requires_grad: bool = False,
                       backward_hooks: Any = None, metadata: Any = None) -> torch.Tensor:
    """torch's tensor rebuild, with any pickled backward hooks and metadata dropped."""
    return torch._utils._rebuild_tensor_v2(storage, offset, size, stride, False, _no_hooks())


def _rebuild_tensor(storage: Any, offset: int, size: Any, stride: Any) -> torch.Tensor:
    return torch._utils._rebuild_tensor(storage, offset, size, stride)


def _rebuild_parameter(data: Any, requires_grad: bool = False, backward_hooks: Any = None,
                       state: Any = None) -> torch.Tensor:
    """A parameter's tensor (hooks and Python attributes of the parameter are not restored)."""
    if not isinstance(data, torch.Tensor):
        raise CodeRefused("torch._utils._rebuild_parameter(non-tensor)")
    return data


def _rebuild_from_type_v2(func: Any, new_type: Any, args: Any, state: Any) -> torch.Tensor:
    """Tensor-subclass rebuild restricted to plain tensors and parameters."""
    if new_type not in (torch.Tensor, torch.nn.Parameter) or func not in _TENSOR_FUNCS:
        raise CodeRefused(f"torch._tensor._rebuild_from_type_v2({getattr(new_type, '__name__', new_type)})")
    return func(*args)


def _codecs_encode(text: Any, encoding: str = "utf-8") -> bytes:
    """How protocol-2 pickles store bytes: `_codecs.encode(str, 'latin1')`; other codecs are refused."""
    if not isinstance(text, str) or str(encoding).lower().replace("-", "") not in ("latin1", "utf8"):
        raise CodeRefused(f"_codecs.encode(..., {encoding!r})")
    return text.encode(encoding)


def _reconstructor(cls: Any, base: Any, state: Any = None) -> Any:
    """copyreg._reconstructor (protocol 0/1 object pickles), for stub classes only."""
    if isinstance(cls, type) and issubclass(cls, Stub):
        return cls.__new__(cls)
    raise CodeRefused(f"copyreg._reconstructor({getattr(cls, '__name__', cls)})")


_TENSOR_FUNCS = (_rebuild_tensor_v2, _rebuild_tensor, _rebuild_parameter)

_ALLOWED: dict[str, Any] = {
    "collections.OrderedDict": collections.OrderedDict,
    "builtins.set": set,
    "builtins.frozenset": frozenset,
    "builtins.bytearray": bytearray,
    "_codecs.encode": _codecs_encode,
    "copyreg._reconstructor": _reconstructor,
    "torch._utils._rebuild_tensor_v2": _rebuild_tensor_v2,
    "torch._utils._rebuild_tensor": _rebuild_tensor,
    "torch._utils._rebuild_parameter": _rebuild_parameter,
    "torch._utils._rebuild_parameter_with_state": _rebuild_parameter,
    "torch._tensor._rebuild_from_type_v2": _rebuild_from_type_v2,
    "torch.Tensor": torch.Tensor,
    "torch.nn.parameter.Parameter": torch.nn.Parameter,
    "torch.Size": torch.Size,
    "torch.device": torch.device,
}
_ALLOWED.update({f"torch.{name}": getattr(torch, name) for name in (
    "float16", "float32", "float64", "bfloat16", "half", "float", "double", "int8", "int16", "int32", "int64",
    "uint8", "bool", "long", "int")})


class _RecordingUnpickler(pickle.Unpickler):
    """An unpickler that resolves globals only through the allow-list; every other name is a stub class."""

    def find_class(self, module: str, name: str) -> Any:
        # Protocol-2 pickles spell some names the Python 2 way (__builtin__.set); map the names, import nothing.
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        qualified = f"{module}.{name}"
        allowed = _ALLOWED.get(qualified)
        if allowed is not None:
            return allowed
        return _stub_type(qualified)


def _load(file: Any, **kwargs: Any) -> Any:
    return _RecordingUnpickler(file, **kwargs).load()


def _loads(data: bytes, **kwargs: Any) -> Any:
    import io

    return _RecordingUnpickler(io.BytesIO(data), **kwargs).load()


# What torch.load receives as `pickle_module` (it subclasses `.Unpickler`; the legacy format also calls `.load`).
safe_pickle = types.ModuleType("yolotui_safe_pickle")
safe_pickle.Unpickler = _RecordingUnpickler  # type: ignore[attr-defined]
safe_pickle.load = _load  # type: ignore[attr-defined]
safe_pickle.loads = _loads  # type: ignore[attr-defined]


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


def load_recorded(path: str | Path) -> Any:
    """The checkpoint's object graph with every non-allowed class replaced by a recording stub.

    UserError naming the file when the pickle tries to call something (it is refused, never run) or cannot
    be read.
    """
    path = Path(path)
    try:
        return torch.load(path, map_location="cpu", weights_only=False, pickle_module=safe_pickle)
    except CodeRefused as exc:
        raise UserError(f"--weights {path}: refused: its pickle tries to call {exc.name}, which a checkpoint "
                        "has no reason to do; nothing from it was run. Use a checkpoint from a trusted "
                        "source") from None
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, zipfile.BadZipFile, AttributeError,
            TypeError, ValueError, KeyError, IndexError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:160]
        raise UserError(f"--weights {path}: cannot read it as a checkpoint ({first})") from None


def is_module(obj: Any) -> bool:
    """True for a recorded nn.Module: a stub whose state holds _parameters and _modules."""
    if not isinstance(obj, Stub):
        return False
    state = obj.stub_dict
    return isinstance(state.get("_parameters"), Mapping) and isinstance(state.get("_modules"), Mapping)


def module_state_dict(module: Stub, prefix: str = "") -> dict[str, torch.Tensor]:
    """The flat state dict of a recorded module, as `nn.Module.state_dict()` names it (persistent buffers)."""
    out: dict[str, torch.Tensor] = {}
    _collect(module, prefix, out)
    return out


def _collect(module: Stub, prefix: str, out: dict[str, torch.Tensor]) -> None:
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
            model_class = picked._stub_name
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
           "as_source_checkpoint", "safe_pickle", "CodeRefused"]
