"""The one YAML reader of yolotui: safe tags only, bounded size, bounded alias expansion (issue 14, item 9).

PyYAML's safe loader runs no code, but a "billion laughs" file (nine levels of ten aliases each) still
describes 10^9 nodes; anything that walks the result (validation, a dump, the wizard's preview) then hangs
with unbounded memory. Every YAML that yolotui reads (data.yaml, model YAMLs, hyp/opt/run.yaml, settings)
goes through `load_text` / `load_file`, which

- refuse a text over `MAX_BYTES` (1 MiB) before parsing,
- compose the node graph first and count the nodes it expands to, aliases followed, refusing more than
  `MAX_NODES` or a recursive alias before anything is built,
- turn too-deep nesting (a RecursionError inside the parser) into the same one-line refusal.

Syntax errors are raised as yaml.YAMLError, as before, so callers keep naming the line.
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
