"""Editing a run's opt.yaml in place for a resumed attempt, keeping the first version as opt.yaml.orig.

The official trainer's `--resume` reads its options from opt.yaml, not from the command line, so a change for
the resumed attempt (the OOM remedy's halved batch, `yolotui resume --epochs N`) has to be written there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from yolotui.runs.atomic import atomic_write_text

ORIG_SUFFIX = ".orig"
MAX_BYTES = 1 << 20


def edit_opt_yaml(path: Path, changes: dict[str, Any]) -> dict[str, list[Any]]:
    """Write `changes` into the opt.yaml at `path` (atomically), keeping its first version as opt.yaml.orig;
    returns {key: [was, now]} for the keys that changed ({} when the file is missing)."""
    import yaml

    from yolotui import safe_yaml
    from yolotui.errors import UserError

    path = Path(path)
    if not path.exists():
        return {}
    if path.stat().st_size > MAX_BYTES:
        raise UserError(f"{path}: larger than {MAX_BYTES // 1024} KiB, not an opt.yaml; fix or recreate the run")
    try:
        opt = safe_yaml.load_file(path)  # bounded aliases too
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not valid YAML ({exc}); fix it before resuming") from exc
    if not isinstance(opt, dict):
        raise UserError(f"{path}: expected a mapping of options; fix it before resuming")
    original = path.with_name(path.name + ORIG_SUFFIX)
    if not original.exists():
        atomic_write_text(original, path.read_text(encoding="utf-8"))
    settings = {key: [opt.get(key), value] for key, value in changes.items() if opt.get(key) != value}
    if settings:
        opt.update(changes)
        atomic_write_text(path, yaml.safe_dump(opt, sort_keys=False))
    return settings
