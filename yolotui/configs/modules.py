"""The names of the model building blocks yolotui's engine knows, for torch-free checks of a model YAML.

The engine's registry (yolotui/engine/model/builder.py: MODULES) must list exactly these; a test keeps the two
in step. A YAML may spell a name with a module path ('nn.Upsample', 'models.common.Conv'); the last part counts.
"""

from __future__ import annotations

KNOWN_MODULES = frozenset({
    "Conv", "AConv", "ADown", "ELAN1", "RepConvN", "RepNBottleneck", "RepNCSP", "RepNCSPELAN4", "SPPELAN",
    "Concat", "Silence", "CBLinear", "CBFuse", "Upsample", "DDetect", "DualDDetect",
})


def short_module_name(name: object) -> str | None:
    """'nn.Upsample' -> 'Upsample' when known; None for an unknown or non-text name."""
    if not isinstance(name, str):
        return None
    short = name.rsplit(".", 1)[-1]
    return short if short in KNOWN_MODULES else None
