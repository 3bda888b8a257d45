"""Bringing a mirrored run back: fetch TARGET/RUN_NAME into a folder, settle it, check every checkpoint.

`fetch` downloads the essentials, the checkpoints and their manifests (pending ones too); `settle` finishes or
drops a pending manifest left by a copy cut short (yolotui.runs.manifest.reconcile, the same rule as for a
run folder); `problems` lists what keeps the folder from being a usable run: no opt.yaml, or a checkpoint
without a manifest or whose bytes are not the ones its manifest names. The job layer
(yolotui.jobs.restore_mirror) decides where the folder goes.
"""

from __future__ import annotations

from pathlib import Path

from yolotui.mirror.push import store_for
from yolotui.mirror.snapshot import CHECKPOINTS, PENDING, SMALL_FILES, describes, read_manifest, sha256_file
from yolotui.mirror.stores import CopyError
from yolotui.mirror.target import Target
from yolotui.runs.layout import OPT_YAML, STATUS_JSON, WEIGHTS_DIR
from yolotui.runs.manifest import reconcile_run


def wanted_files() -> list[str]:
    """Every file a mirror may hold, relative to TARGET/RUN_NAME."""
    rels = [*SMALL_FILES, STATUS_JSON]
    for name in CHECKPOINTS:
        rels += [f"{WEIGHTS_DIR}/{name}", f"{WEIGHTS_DIR}/{name}.json", f"{WEIGHTS_DIR}/{name}.json{PENDING}"]
    return rels


def fetch(target: Target, name: str, into: Path) -> list[str]:
    """Download run `name` from `target` into `into`; the files found. CopyError when there is no run there."""
    store = store_for(target, name)
    found = store.get(wanted_files(), Path(into))
    if OPT_YAML not in found:
        raise CopyError(f"{target.join(name)}: no mirrored run there (no {OPT_YAML}); check the target and the "
                        "run's name (the mirror keeps each run in a folder named after it)")
    return found


def settle(folder: Path) -> list[str]:
    """Finish or drop pending manifests (see the module docstring); the lines saying what was done."""
    return reconcile_run(Path(folder))


def problems(folder: Path) -> list[str]:
    """What makes the fetched folder unusable, one line each (empty when it is fine)."""
    folder = Path(folder)
    found = []
    if not (folder / OPT_YAML).is_file():
        found.append(f"{OPT_YAML} is missing")
    for name in CHECKPOINTS:
        checkpoint = folder / WEIGHTS_DIR / name
        if not checkpoint.is_file():
            continue
        manifest = read_manifest(checkpoint.with_name(name + ".json"))
        if manifest is None:
            found.append(f"{WEIGHTS_DIR}/{name} has no readable manifest ({name}.json)")
            continue
        digest, size = sha256_file(checkpoint), checkpoint.stat().st_size
        if not describes(manifest[0], digest, size):
            found.append(f"{WEIGHTS_DIR}/{name} does not match its manifest (sha256 {digest[:12]}..., "
                         f"manifest {str(manifest[0].get('sha256'))[:12]}...)")
    return found
