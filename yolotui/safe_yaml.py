"""The one YAML reader of yolotui: safe tags only, bounded size, bounded alias expansion.

PyYAML's safe loader runs no code, but a "billion laughs" file (nine levels of ten aliases each) still
describes 10^9 nodes; anything that walks the result (validation, a dump, the wizard's preview) then hangs
with unbounded memory. Every YAML that yolotui reads (data.yaml, model YAMLs, hyp/opt/run.yaml, settings)
goes through `load_text` / `load_file`, which

- refuse a text over `MAX_BYTES` (1 MiB) before parsing,
- compose the node graph first and count the nodes it expands to, aliases followed, refusing more than
  `MAX_NODES` or a recursive alias before anything is built,
- turn too-deep nesting (a RecursionError inside the parser) into the same one-line refusal.

Syntax errors are raised as yaml.YAMLError, as before, so callers keep naming the line (`error_line`).
`load_mapping` is the whole job for a file that must hold a mapping: read, bound, parse, and one UserError
naming the file (and line) for each way it can be wrong; config.load_yaml and the job layer's settings
reading (runs.usersettings.read_yaml_mapping) both go through it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from yolotui.errors import UserError

MAX_BYTES = 1 << 20
MAX_NODES = 200_000


class YamlLimitError(UserError):
    """A YAML text exceeds yolotui's bounds (size, expansion, nesting); the message names the source."""


def _expanded_size(root: yaml.Node, source: str, limit: int) -> int:
    """Nodes `root` expands to with every alias followed (shared nodes counted each time they are used)."""
    sizes: dict[int, int] = {}
    busy: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in busy:
            raise YamlLimitError(f"{source}: a YAML alias refers to itself (recursive anchor); refusing it")
        busy.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            for child in node.value:
                total += size(child)
                if total > limit:
                    break
        elif isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                total += size(k) + size(v)
                if total > limit:
                    break
        busy.discard(key)
        if total > limit:
            raise YamlLimitError(f"{source}: the YAML expands to more than {limit} values through its aliases "
                                 "(&anchor/*alias); refusing it (is it a 'billion laughs' file?)")
        sizes[key] = total
        return total

    return size(root)


def load_text(text: str | bytes, source: str = "YAML", max_nodes: int = MAX_NODES, fast: bool = False) -> Any:
    """Parse one YAML document safely within the bounds above; None for an empty document.

    `fast` uses libyaml's C parser where installed: only for files shipped with yolotui (themes), whose
    nesting is known; everything a user can hand in goes through the pure-Python parser, whose recursion
    limit turns absurd nesting into an error instead of a crash.
    """
    if len(text) > MAX_BYTES:
        raise YamlLimitError(f"{source}: {len(text)} bytes is larger than the {MAX_BYTES // 1024} KiB yolotui "
                             "reads from a YAML file; is it the right file?")
    loader_class = getattr(yaml, "CSafeLoader", yaml.SafeLoader) if fast else yaml.SafeLoader
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, source, max_nodes)
        return loader.construct_document(node)
    except RecursionError:
        raise YamlLimitError(f"{source}: the YAML is nested too deeply to read; refusing it") from None
    finally:
        loader.dispose()


def load_file(path: Path, source: str | None = None, max_nodes: int = MAX_NODES) -> Any:
    """Read `path` (at most MAX_BYTES, UTF-8) and `load_text` it; OSError/UnicodeDecodeError as open() raises."""
    path = Path(path)
    source = source or str(path)
    with open(path, "rb") as handle:
        raw = handle.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise YamlLimitError(f"{source}: larger than the {MAX_BYTES // 1024} KiB yolotui reads from a YAML file; "
                             "is it the right file?")
    return load_text(raw.decode("utf-8"), source, max_nodes)


def error_line(exc: BaseException) -> str:
    """' line N' for a YAML syntax error that knows where it is, else ''."""
    mark = getattr(exc, "problem_mark", None)
    return f" line {mark.line + 1}" if mark is not None else ""


def load_mapping(path: Path, what: str = "file", max_bytes: int = MAX_BYTES) -> dict[str, Any]:
    """Parse the YAML mapping in `path` (at most `max_bytes`; empty: {}); UserError naming `what`, the file and
    the line when it is missing, unreadable, too large, not UTF-8, not YAML, over the bounds or not a mapping."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(max_bytes + 1)
    except FileNotFoundError:
        raise UserError(f"{what} {path}: no such file") from None
    except OSError as exc:
        raise UserError(f"{what} {path}: cannot read it ({exc.strerror})") from None
    if len(raw) > max_bytes:
        raise UserError(f"{what} {path}: larger than {max_bytes >> 10} KiB; is it the right file?")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{what} {path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    try:
        data = load_text(text, f"{what} {path}")
    except yaml.YAMLError as exc:
        raise UserError(f"{what} {path}{error_line(exc)}: not valid YAML; fix the syntax there") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"{what} {path}: expected a mapping of keys to values, got {type(data).__name__}")
    return data
