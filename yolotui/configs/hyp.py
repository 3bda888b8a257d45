"""Resolving a --hyp value to a hyperparameter file: a path, or the name of a file yolotui ships."""

from __future__ import annotations

from pathlib import Path

from yolotui.errors import UserError

CONFIGS_DIR = Path(__file__).resolve().parent
DEFAULT_HYP = "hyp.scratch-high.yaml"


def shipped_hyps() -> list[str]:
    """File names of the hyperparameter files shipped with yolotui."""
    return sorted(p.name for p in CONFIGS_DIR.glob("hyp.*.yaml"))


def resolve_hyp(value: str | Path | None) -> Path:
    """An existing path as given, else the shipped file of the same name (`data/hyps/hyp.scratch-high.yaml`).

    Empty or None gives the default recipe. UserError names the value and the shipped choices when neither exists.
    """
    if value is None or str(value).strip() == "":
        return CONFIGS_DIR / DEFAULT_HYP
    path = Path(str(value)).expanduser()
    if path.is_file():
        return path
    shipped = CONFIGS_DIR / path.name
    if path.name.startswith("hyp.") and shipped.is_file():
        return shipped
    choices = ", ".join(shipped_hyps()) or "none"
    raise UserError(f"--hyp {value}: no such file; give a path or a shipped name ({choices})")
