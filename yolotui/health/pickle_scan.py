"""Read a pickle by walking its opcodes on a symbolic stack: nothing is imported, called or executed.

Plain values (dict, list, tuple, set, str, bytes, int, float, bool, None) are rebuilt as themselves.
Everything that would run code when unpickled stays a symbol: a class or function reference is a
`Global`, a call to it (REDUCE, NEWOBJ, INST, OBJ) is a `Call`, and torch's persistent ids for tensor
storages are `PersistentRef`s. `collections.OrderedDict()` is the one call rebuilt as a plain dict,
because torch state dicts are pickled that way.

The walk records every global the pickle references, so a caller can tell a tensor-only checkpoint
from one that carries pickled classes, and both from one that would run `os.system`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any


class PickleScanError(ValueError):
    """The byte stream is not a complete, well-formed pickle (torn, truncated or not a pickle)."""


@dataclass(frozen=True)
class Global:
    """A reference to `module.name` that unpickling would import."""

    module: str
    name: str

    def __str__(self) -> str:
        return f"{self.module}.{self.name}"


@dataclass(eq=False)
class Call:
    """What unpickling would get by calling `func(*args)` (REDUCE/NEWOBJ/INST/OBJ), never called here."""

    func: Any
    args: Any
    state: Any = None
    items: list[Any] = field(default_factory=list)
    how: str = "call"  # 'call' (REDUCE, INST, OBJ: runs func) or 'new' (NEWOBJ: cls.__new__, then BUILD)

    def __repr__(self) -> str:
        return f"Call({self.func})"


@dataclass(frozen=True)
class PersistentRef:
    """A persistent id (torch: ('storage', storage type, key, location, numel))."""

    pid: Any


class _Mark:
    """The MARK sentinel on the stack."""


MARK = _Mark()
ORDERED_DICT = Global("collections", "OrderedDict")


@dataclass
class ScanResult:
    """The rebuilt top-level value and what the walk saw on the way."""

    value: Any
    globals: set[Global]
    persistent_ids: list[Any]
    opcodes: int


def _line(data: bytes, pos: int) -> tuple[bytes, int]:
    end = data.find(b"\n", pos)
    if end < 0:
        raise PickleScanError("pickle ends inside a text argument")
    return data[pos:end], end + 1


def _pop_mark(stack: list[Any]) -> list[Any]:
    for i in range(len(stack) - 1, -1, -1):
        if stack[i] is MARK:
            items = stack[i + 1 :]
            del stack[i:]
            return items
    raise PickleScanError("pickle pops past a MARK that was never pushed")


def _hashable(key: Any) -> Any:
    try:
        hash(key)
        return key
    except TypeError:
        return repr(key)


def _set_items(target: Any, pairs: list[Any]) -> None:
    if isinstance(target, dict):
        for i in range(0, len(pairs) - 1, 2):
            target[_hashable(pairs[i])] = pairs[i + 1]
    elif isinstance(target, Call):
        target.items.extend(pairs)


def _append_items(target: Any, values: list[Any]) -> None:
    if isinstance(target, list):
        target.extend(values)
    elif isinstance(target, Call):
        target.items.extend(values)


def _make_call(func: Any, args: Any) -> Any:
    if func == ORDERED_DICT and args in ((), []):
        return {}
    return Call(func, args)


def scan_pickle(data: bytes, max_opcodes: int = 20_000_000) -> ScanResult:
    """Walk the pickle in `data` symbolically and return its top-level value; PickleScanError if torn."""
    try:
        return _walk(data, max_opcodes)
    except PickleScanError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError, MemoryError) as exc:
        # Damaged bytes can make any argument malformed (bad UTF-8, unhashable keys ...): all mean "torn".
        raise PickleScanError(f"malformed pickle ({type(exc).__name__}: {exc})") from exc


def _walk(data: bytes, max_opcodes: int) -> ScanResult:
    stack: list[Any] = []
    memo: dict[int, Any] = {}
    globals_seen: set[Global] = set()
    pids: list[Any] = []
    pos = 0
    size = len(data)
    count = 0
    unpack_from = struct.unpack_from

    def need(n: int) -> None:
        if pos + n > size:
            raise PickleScanError("pickle is truncated")

    def pop() -> Any:
        if not stack:
            raise PickleScanError("pickle pops an empty stack")
        return stack.pop()

    def top() -> Any:
        if not stack:
            raise PickleScanError("pickle pops an empty stack")
        return stack[-1]

    while True:
        if pos >= size:
            raise PickleScanError("pickle is truncated (no STOP opcode)")
        op = data[pos]
        pos += 1
        count += 1
        if count > max_opcodes:
            raise PickleScanError("pickle is too large to scan")
        # Ordered roughly by how often torch checkpoints use them.
        if op == 0x71:  # BINPUT
            need(1)
            if stack:
                memo[data[pos]] = stack[-1]
            pos += 1
        elif op == 0x68:  # BINGET
            need(1)
            try:
                stack.append(memo[data[pos]])
            except KeyError as exc:
                raise PickleScanError("pickle reads a memo slot it never wrote") from exc
            pos += 1
        elif op == 0x72:  # LONG_BINPUT
            need(4)
            if stack:
                memo[unpack_from("<I", data, pos)[0]] = stack[-1]
            pos += 4
        elif op == 0x6A:  # LONG_BINGET
            need(4)
            try:
                stack.append(memo[unpack_from("<I", data, pos)[0]])
            except KeyError as exc:
                raise PickleScanError("pickle reads a memo slot it never wrote") from exc
            pos += 4
        elif op == 0x94:  # MEMOIZE
            if stack:
                memo[len(memo)] = stack[-1]
        elif op == 0x4B:  # BININT1
            need(1)
            stack.append(data[pos])
            pos += 1
        elif op == 0x4D:  # BININT2
            need(2)
            stack.append(unpack_from("<H", data, pos)[0])
            pos += 2
        elif op == 0x4A:  # BININT
            need(4)
            stack.append(unpack_from("<i", data, pos)[0])
            pos += 4
        elif op == 0x58:  # BINUNICODE
            need(4)
            n = unpack_from("<I", data, pos)[0]
            pos += 4
            need(n)
            stack.append(data[pos : pos + n].decode("utf-8", "surrogatepass"))
            pos += n
        elif op == 0x8C:  # SHORT_BINUNICODE
            need(1)
            n = data[pos]
            pos += 1
            need(n)
            stack.append(data[pos : pos + n].decode("utf-8", "surrogatepass"))
            pos += n
        elif op == 0x8D:  # BINUNICODE8
            need(8)
            n = unpack_from("<Q", data, pos)[0]
            pos += 8
            need(n)
            stack.append(data[pos : pos + n].decode("utf-8", "surrogatepass"))
            pos += n
        elif op == 0x28:  # MARK
            stack.append(MARK)
        elif op == 0x74:  # TUPLE
            stack.append(tuple(_pop_mark(stack)))
        elif op == 0x29:  # EMPTY_TUPLE
            stack.append(())
        elif op == 0x85:  # TUPLE1
            stack.append((pop(),))
        elif op == 0x86:  # TUPLE2
            b = pop()
            a = pop()
            stack.append((a, b))
        elif op == 0x87:  # TUPLE3
            c = pop()
            b = pop()
            a = pop()
            stack.append((a, b, c))
        elif op == 0x52:  # REDUCE
            args = pop()
            func = pop()
            stack.append(_make_call(func, args))
        elif op == 0x51:  # BINPERSID
            pid = pop()
            pids.append(pid)
            stack.append(PersistentRef(pid))
        elif op == 0x50:  # PERSID
            text, pos = _line(data, pos)
            pid = text.decode("ascii", "replace")
            pids.append(pid)
            stack.append(PersistentRef(pid))
        elif op == 0x63:  # GLOBAL
            module, pos = _line(data, pos)
            name, pos = _line(data, pos)
            ref = Global(module.decode("utf-8", "replace"), name.decode("utf-8", "replace"))
            globals_seen.add(ref)
            stack.append(ref)
        elif op == 0x93:  # STACK_GLOBAL
            name = pop()
            module = pop()
            ref = Global(str(module), str(name))
            globals_seen.add(ref)
            stack.append(ref)
        elif op == 0x89:  # NEWFALSE
            stack.append(False)
        elif op == 0x88:  # NEWTRUE
            stack.append(True)
        elif op == 0x4E:  # NONE
            stack.append(None)
        elif op == 0x7D:  # EMPTY_DICT
            stack.append({})
        elif op == 0x5D:  # EMPTY_LIST
            stack.append([])
        elif op == 0x73:  # SETITEM
            value = pop()
            key = pop()
            _set_items(top(), [key, value])
        elif op == 0x75:  # SETITEMS
            pairs = _pop_mark(stack)
            _set_items(top(), pairs)
        elif op == 0x61:  # APPEND
            value = pop()
            _append_items(top(), [value])
        elif op == 0x65:  # APPENDS
            values = _pop_mark(stack)
            _append_items(top(), values)
        elif op == 0x62:  # BUILD
            state = pop()
            if isinstance(top(), Call):
                stack[-1].state = state
        elif op == 0x47:  # BINFLOAT
            need(8)
            stack.append(unpack_from(">d", data, pos)[0])
            pos += 8
        elif op == 0x8A:  # LONG1
            need(1)
            n = data[pos]
            pos += 1
            need(n)
            stack.append(int.from_bytes(data[pos : pos + n], "little", signed=True))
            pos += n
        elif op == 0x8B:  # LONG4
            need(4)
            n = unpack_from("<i", data, pos)[0]
            pos += 4
            if n < 0:
                raise PickleScanError("pickle has a negative length")
            need(n)
            stack.append(int.from_bytes(data[pos : pos + n], "little", signed=True))
            pos += n
        elif op in (0x42, 0x43, 0x8E, 0x96, 0x54, 0x55):  # BINBYTES, SHORT_BINBYTES, BINBYTES8, BYTEARRAY8, BINSTRING, SHORT_BINSTRING
            width = {0x42: 4, 0x43: 1, 0x8E: 8, 0x96: 8, 0x54: 4, 0x55: 1}[op]
            need(width)
            n = int.from_bytes(data[pos : pos + width], "little", signed=op == 0x54)
            pos += width
            if n < 0:
                raise PickleScanError("pickle has a negative length")
            need(n)
            raw = data[pos : pos + n]
            pos += n
            stack.append(raw.decode("latin-1") if op in (0x54, 0x55) else raw)
        elif op == 0x80:  # PROTO
            need(1)
            pos += 1
        elif op == 0x95:  # FRAME (a hint for buffered readers; the opcodes simply continue)
            need(8)
            pos += 8
        elif op == 0x2E:  # STOP
            if len(stack) != 1:
                raise PickleScanError("pickle stops with a malformed stack")
            return ScanResult(stack[0], globals_seen, pids, count)
        elif op == 0x81:  # NEWOBJ
            args = pop()
            cls = pop()
            stack.append(Call(cls, args, how="new"))
        elif op == 0x92:  # NEWOBJ_EX
            kwargs = pop()
            args = pop()
            cls = pop()
            stack.append(Call(cls, (args, kwargs), how="new"))
        elif op == 0x6F:  # OBJ
            items = _pop_mark(stack)
            if not items:
                raise PickleScanError("pickle OBJ without a class")
            stack.append(Call(items[0], tuple(items[1:])))
        elif op == 0x69:  # INST
            module, pos = _line(data, pos)
            name, pos = _line(data, pos)
            ref = Global(module.decode("utf-8", "replace"), name.decode("utf-8", "replace"))
            globals_seen.add(ref)
            stack.append(Call(ref, tuple(_pop_mark(stack))))
        elif op == 0x30:  # POP
            if stack and stack[-1] is MARK:
                stack.pop()
            else:
                pop()
        elif op == 0x31:  # POP_MARK
            _pop_mark(stack)
        elif op == 0x32:  # DUP
            stack.append(top())
        elif op == 0x49:  # INT (also the protocol-0 spelling of True/False)
            text, pos = _line(data, pos)
            if text == b"01":
                stack.append(True)
            elif text == b"00":
                stack.append(False)
            else:
                stack.append(_parse_int(text))
        elif op == 0x4C:  # LONG
            text, pos = _line(data, pos)
            stack.append(_parse_int(text.rstrip(b"L")))
        elif op == 0x46:  # FLOAT
            text, pos = _line(data, pos)
            try:
                stack.append(float(text))
            except ValueError as exc:
                raise PickleScanError("pickle has a malformed FLOAT") from exc
        elif op in (0x53, 0x56):  # STRING, UNICODE (text forms)
            text, pos = _line(data, pos)
            stack.append(text.decode("latin-1" if op == 0x53 else "raw_unicode_escape").strip("'\""))
        elif op == 0x6C:  # LIST
            stack.append(list(_pop_mark(stack)))
        elif op == 0x64:  # DICT
            items = _pop_mark(stack)
            built: dict[Any, Any] = {}
            _set_items(built, items)
            stack.append(built)
        elif op == 0x8F:  # EMPTY_SET
            stack.append(set())
        elif op == 0x90:  # ADDITEMS
            values = _pop_mark(stack)
            if stack and isinstance(stack[-1], set):
                stack[-1].update(_hashable(v) for v in values)
        elif op == 0x91:  # FROZENSET
            stack.append(frozenset(_hashable(v) for v in _pop_mark(stack)))
        elif op in (0x82, 0x83, 0x84):  # EXT1, EXT2, EXT4: a registered extension code names a global
            width = {0x82: 1, 0x83: 2, 0x84: 4}[op]
            need(width)
            code = int.from_bytes(data[pos : pos + width], "little")
            pos += width
            ref = Global("copyreg-extension", str(code))
            globals_seen.add(ref)
            stack.append(ref)
        elif op in (0x67, 0x70):  # GET, PUT (text forms)
            text, pos = _line(data, pos)
            key = _parse_int(text)
            if op == 0x70:
                if stack:
                    memo[key] = stack[-1]
            else:
                if key not in memo:
                    raise PickleScanError("pickle reads a memo slot it never wrote")
                stack.append(memo[key])
        elif op == 0x97:  # NEXT_BUFFER (out-of-band data: not in the file)
            stack.append(None)
        elif op == 0x98:  # READONLY_BUFFER
            pass
        else:
            raise PickleScanError(f"not a pickle: unknown opcode 0x{op:02x} at byte {pos - 1}")


def _parse_int(text: bytes) -> int:
    try:
        return int(text)
    except ValueError as exc:
        raise PickleScanError("pickle has a malformed integer") from exc


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
