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
        return _Walker(data, max_opcodes).run()
    except PickleScanError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError, MemoryError) as exc:
        # Damaged bytes can make any argument malformed (bad UTF-8, unhashable keys ...): all mean "torn".
        raise PickleScanError(f"malformed pickle ({type(exc).__name__}: {exc})") from exc


STOP = 0x2E
_CONSTANTS = {0x4E: lambda: None, 0x88: lambda: True, 0x89: lambda: False, 0x29: tuple, 0x7D: dict, 0x5D: list,
              0x8F: set}  # NONE, NEWTRUE, NEWFALSE, EMPTY_TUPLE, EMPTY_DICT, EMPTY_LIST, EMPTY_SET
_NUMBERS = {0x4B: ("<B", 1), 0x4D: ("<H", 2), 0x4A: ("<i", 4), 0x47: (">d", 8)}  # BININT1/2, BININT, BINFLOAT
_UNICODE_WIDTHS = {0x58: "<I", 0x8C: "<B", 0x8D: "<Q"}  # BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
# BINBYTES, SHORT_BINBYTES, BINBYTES8, BYTEARRAY8, BINSTRING, SHORT_BINSTRING: the length's width in bytes
_BYTES_WIDTHS = {0x42: 4, 0x43: 1, 0x8E: 8, 0x96: 8, 0x54: 4, 0x55: 1}
_EXT_WIDTHS = {0x82: 1, 0x83: 2, 0x84: 4}  # EXT1, EXT2, EXT4: a registered extension code names a global
_SKIPPED = {0x80: 1, 0x95: 8, 0x98: 0}  # PROTO, FRAME (a hint for buffered readers), READONLY_BUFFER


class _Walker:
    """The symbolic unpickler's state (stack, memo, position) and one method per family of opcodes."""

    def __init__(self, data: bytes, max_opcodes: int) -> None:
        self.data, self.size, self.max_opcodes = data, len(data), max_opcodes
        self.pos = 0
        self.count = 0
        self.stack: list[Any] = []
        self.memo: dict[int, Any] = {}
        self.globals_seen: set[Global] = set()
        self.pids: list[Any] = []

    def need(self, n: int) -> None:
        if self.pos + n > self.size:
            raise PickleScanError("pickle is truncated")

    def pop(self) -> Any:
        if not self.stack:
            raise PickleScanError("pickle pops an empty stack")
        return self.stack.pop()

    def top(self) -> Any:
        if not self.stack:
            raise PickleScanError("pickle pops an empty stack")
        return self.stack[-1]

    def line(self) -> bytes:
        text, self.pos = _line(self.data, self.pos)
        return text

    def take(self, n: int) -> bytes:
        """The next `n` bytes, checked to be there."""
        self.need(n)
        raw = self.data[self.pos : self.pos + n]
        self.pos += n
        return raw

    def run(self) -> ScanResult:
        data, stack, memo, size, handlers = self.data, self.stack, self.memo, self.size, _HANDLERS
        pos, count, max_opcodes = self.pos, self.count, self.max_opcodes
        while True:
            if pos >= size:
                raise PickleScanError("pickle is truncated (no STOP opcode)")
            op = data[pos]
            pos += 1
            count += 1
            if count > max_opcodes:
                raise PickleScanError("pickle is too large to scan")
            # The commonest opcodes of a torch state dict, inline when well-formed (a method call each would
            # double the walk's time); anything unusual takes the general handler below.
            if op == 0x72 and pos + 4 <= size:  # LONG_BINPUT
                if stack:
                    memo[int.from_bytes(data[pos : pos + 4], "little")] = stack[-1]
                pos += 4
            elif op == 0x68 and pos < size and data[pos] in memo:  # BINGET
                stack.append(memo[data[pos]])
                pos += 1
            elif op == 0x4B and pos < size:  # BININT1
                stack.append(data[pos])
                pos += 1
            elif op == 0x28:  # MARK
                stack.append(MARK)
            elif op == STOP:
                if len(stack) != 1:
                    raise PickleScanError("pickle stops with a malformed stack")
                return ScanResult(stack[0], self.globals_seen, self.pids, count)
            else:
                handler = handlers.get(op)
                if handler is None:
                    raise PickleScanError(f"not a pickle: unknown opcode 0x{op:02x} at byte {pos - 1}")
                self.pos, self.count = pos, count
                handler(self, op)
                pos = self.pos

    def put(self, op: int) -> None:
        """BINPUT, LONG_BINPUT: remember the top of the stack under a 1- or 4-byte key."""
        width = 1 if op == 0x71 else 4
        pos = self.pos
        if pos + width > self.size:
            raise PickleScanError("pickle is truncated")
        if self.stack:
            self.memo[self.data[pos] if width == 1 else int.from_bytes(self.data[pos : pos + 4], "little")] = \
                self.stack[-1]
        self.pos = pos + width

    def get(self, op: int) -> None:
        """BINGET, LONG_BINGET: push what a 1- or 4-byte key remembers."""
        width = 1 if op == 0x68 else 4
        pos = self.pos
        if pos + width > self.size:
            raise PickleScanError("pickle is truncated")
        key = self.data[pos] if width == 1 else int.from_bytes(self.data[pos : pos + 4], "little")
        if key not in self.memo:
            raise PickleScanError("pickle reads a memo slot it never wrote")
        self.stack.append(self.memo[key])
        self.pos = pos + width

    def memo_text(self, op: int) -> None:
        """MEMOIZE, and the text forms PUT and GET."""
        if op == 0x94:
            if self.stack:
                self.memo[len(self.memo)] = self.stack[-1]
            return
        key = _parse_int(self.line())
        if op == 0x70:
            if self.stack:
                self.memo[key] = self.stack[-1]
        elif key not in self.memo:
            raise PickleScanError("pickle reads a memo slot it never wrote")
        else:
            self.stack.append(self.memo[key])

    def constant(self, op: int) -> None:
        self.stack.append(_CONSTANTS[op]())

    def number(self, op: int) -> None:
        fmt, width = _NUMBERS[op]
        self.need(width)
        self.stack.append(struct.unpack_from(fmt, self.data, self.pos)[0])
        self.pos += width

    def long(self, op: int) -> None:
        """LONG1, LONG4: a little-endian two's-complement integer of a given length."""
        width = 1 if op == 0x8A else 4
        self.need(width)
        n = int.from_bytes(self.data[self.pos : self.pos + width], "little", signed=width == 4)
        self.pos += width
        if n < 0:
            raise PickleScanError("pickle has a negative length")
        self.stack.append(int.from_bytes(self.take(n), "little", signed=True))

    def unicode(self, op: int) -> None:
        fmt = _UNICODE_WIDTHS[op]
        width = struct.calcsize(fmt)
        self.need(width)
        n = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += width
        self.stack.append(self.take(n).decode("utf-8", "surrogatepass"))

    def raw_bytes(self, op: int) -> None:
        width = _BYTES_WIDTHS[op]
        self.need(width)
        n = int.from_bytes(self.data[self.pos : self.pos + width], "little", signed=op == 0x54)
        self.pos += width
        if n < 0:
            raise PickleScanError("pickle has a negative length")
        raw = self.take(n)
        self.stack.append(raw.decode("latin-1") if op in (0x54, 0x55) else raw)

    def text_value(self, op: int) -> None:
        """INT (also the protocol-0 spelling of True/False), LONG, FLOAT, STRING, UNICODE: values as text lines."""
        text = self.line()
        if op == 0x49:
            self.stack.append(True if text == b"01" else False if text == b"00" else _parse_int(text))
        elif op == 0x4C:
            self.stack.append(_parse_int(text.rstrip(b"L")))
        elif op == 0x46:
            try:
                self.stack.append(float(text))
            except ValueError as exc:
                raise PickleScanError("pickle has a malformed FLOAT") from exc
        else:
            self.stack.append(text.decode("latin-1" if op == 0x53 else "raw_unicode_escape").strip("'\""))

    def marks(self, op: int) -> None:
        """POP, POP_MARK, DUP (MARK is pushed in run)."""
        stack = self.stack
        if op == 0x30:
            if stack and stack[-1] is MARK:
                stack.pop()
            else:
                self.pop()
        elif op == 0x31:
            _pop_mark(stack)
        else:
            stack.append(self.top())

    def sequence(self, op: int) -> None:
        """TUPLE, TUPLE1/2/3, LIST, DICT, FROZENSET: built from the stack."""
        stack = self.stack
        if op in (0x85, 0x86, 0x87):
            items = [self.pop() for _ in range(op - 0x84)]
            stack.append(tuple(reversed(items)))
        elif op == 0x74:
            stack.append(tuple(_pop_mark(stack)))
        elif op == 0x6C:
            stack.append(list(_pop_mark(stack)))
        elif op == 0x64:
            built: dict[Any, Any] = {}
            _set_items(built, _pop_mark(stack))
            stack.append(built)
        else:
            stack.append(frozenset(_hashable(v) for v in _pop_mark(stack)))

    def fill(self, op: int) -> None:
        """SETITEM, SETITEMS, APPEND, APPENDS, ADDITEMS, BUILD: add to the object on top of the stack."""
        stack = self.stack
        if op == 0x73:
            value = self.pop()
            key = self.pop()
            _set_items(self.top(), [key, value])
        elif op == 0x75:
            pairs = _pop_mark(stack)
            _set_items(self.top(), pairs)
        elif op == 0x61:
            value = self.pop()
            _append_items(self.top(), [value])
        elif op == 0x65:
            values = _pop_mark(stack)
            _append_items(self.top(), values)
        elif op == 0x90:
            values = _pop_mark(stack)
            if stack and isinstance(stack[-1], set):
                stack[-1].update(_hashable(v) for v in values)
        else:  # BUILD
            state = self.pop()
            if isinstance(self.top(), Call):
                stack[-1].state = state

    def reference(self, op: int) -> None:
        """GLOBAL, STACK_GLOBAL, EXT1/2/4: a name unpickling would import (recorded, never imported)."""
        if op == 0x63:
            module, name = self.line(), self.line()
            ref = Global(module.decode("utf-8", "replace"), name.decode("utf-8", "replace"))
        elif op == 0x93:
            name = self.pop()
            module = self.pop()
            ref = Global(str(module), str(name))
        else:
            width = _EXT_WIDTHS[op]
            ref = Global("copyreg-extension", str(int.from_bytes(self.take(width), "little")))
        self.globals_seen.add(ref)
        self.stack.append(ref)

    def call(self, op: int) -> None:
        """REDUCE, NEWOBJ, NEWOBJ_EX, OBJ, INST: what unpickling would call, kept as a Call."""
        stack = self.stack
        if op == 0x52:
            args = self.pop()
            stack.append(_make_call(self.pop(), args))
        elif op == 0x81:
            args = self.pop()
            stack.append(Call(self.pop(), args, how="new"))
        elif op == 0x92:
            kwargs = self.pop()
            args = self.pop()
            stack.append(Call(self.pop(), (args, kwargs), how="new"))
        elif op == 0x6F:
            items = _pop_mark(stack)
            if not items:
                raise PickleScanError("pickle OBJ without a class")
            stack.append(Call(items[0], tuple(items[1:])))
        else:  # INST
            module, name = self.line(), self.line()
            ref = Global(module.decode("utf-8", "replace"), name.decode("utf-8", "replace"))
            self.globals_seen.add(ref)
            stack.append(Call(ref, tuple(_pop_mark(stack))))

    def persistent(self, op: int) -> None:
        """BINPERSID, PERSID: torch's reference to a tensor storage."""
        pid = self.pop() if op == 0x51 else self.line().decode("ascii", "replace")
        self.pids.append(pid)
        self.stack.append(PersistentRef(pid))

    def skip(self, op: int) -> None:
        width = _SKIPPED[op]
        self.need(width)
        self.pos += width

    def next_buffer(self, op: int) -> None:
        self.stack.append(None)  # NEXT_BUFFER: out-of-band data, not in the file


def _table() -> dict[int, Any]:
    families = {
        _Walker.put: (0x71, 0x72), _Walker.get: (0x68, 0x6A), _Walker.memo_text: (0x94, 0x67, 0x70),
        _Walker.constant: tuple(_CONSTANTS),
        _Walker.number: tuple(_NUMBERS), _Walker.long: (0x8A, 0x8B), _Walker.unicode: tuple(_UNICODE_WIDTHS),
        _Walker.raw_bytes: tuple(_BYTES_WIDTHS), _Walker.text_value: (0x49, 0x4C, 0x46, 0x53, 0x56),
        _Walker.marks: (0x30, 0x31, 0x32), _Walker.sequence: (0x74, 0x85, 0x86, 0x87, 0x6C, 0x64, 0x91),
        _Walker.fill: (0x73, 0x75, 0x61, 0x65, 0x90, 0x62), _Walker.reference: (0x63, 0x93, *_EXT_WIDTHS),
        _Walker.call: (0x52, 0x81, 0x92, 0x6F, 0x69), _Walker.persistent: (0x51, 0x50),
        _Walker.skip: tuple(_SKIPPED), _Walker.next_buffer: (0x97,),
    }
    return {op: handler for handler, ops in families.items() for op in ops}


_HANDLERS = _table()


def _parse_int(text: bytes) -> int:
    try:
        return int(text)
    except ValueError as exc:
        raise PickleScanError("pickle has a malformed integer") from exc
