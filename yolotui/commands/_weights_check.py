"""A --weights file checked before anything detaches, without torch: torn, foreign or code-running pickles fail.

The scan is yolotui.health's pickle-opcode walk (nothing is unpickled). An official YOLOv9 checkpoint passes
with a note: the trainer reads its weights with yolotui.engine.official, which runs no code from the file.
"""

from __future__ import annotations

from pathlib import Path

from yolotui.errors import UserError


def check_weights_file(path: str | Path) -> list[str]:
    """Notes about a usable --weights file; UserError naming it when it is damaged or would run code."""
    from yolotui.health.checkpoint import OFFICIAL, inspect_checkpoint

    info = inspect_checkpoint(Path(path), verify_hash=False)
    if info.unsafe_globals:
        raise UserError(f"--weights {path}: refused: its pickle names {info.unsafe_globals[0]}, which would run "
                        "code if loaded; use a checkpoint from a trusted source")
    if info.error:
        raise UserError(f"--weights {path}: {info.error}; give a yolotui or YOLOv9 .pt checkpoint")
    if info.kind == OFFICIAL:
        return [f"--weights {path}: an official YOLOv9 checkpoint; its weights are read without running code "
                "from it, and transferred by name and shape"]
    return []


__all__ = ["check_weights_file"]
