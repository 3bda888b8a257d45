"""Config drift: opt.yaml, hyp.yaml and the data set's YAML now, against what the run started with.

Baselines, first found wins:
- opt.yaml: the checkpoint's `opt` dict (what the trainer last used), else the first `start` event's `opt`,
  else its `config` summary. Keys only opt.yaml has are not drift (writers add defaults); `resume`,
  `save_dir`, the remedies' `lr_scale`/`accumulate` and the inlined `hyp` are left out.
- hyp.yaml: the checkpoint's `hyp` (official checkpoints: `opt['hyp']`), else the start event's `hyp`.
- data YAML: recorded at start, in run.yaml as `data_sha256` (hex sha256 of the file's bytes) and
  `data_config` (its parsed mapping); the trainer copies both into its `start` event. The hash says
  whether anything changed; the mapping names the keys. `data_fingerprint(path)` computes both.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from yolotui.runs.events import parse_lines
from yolotui.runs.layout import EVENTS_JSONL, HYP_YAML, OPT_YAML, RUN_YAML

DATA_SHA256_KEY = "data_sha256"
DATA_CONFIG_KEY = "data_config"
# `hyp` is compared as hyp.yaml; the remedies set lr_scale and accumulate on purpose
IGNORED_OPT_KEYS = frozenset({"resume", "hyp", "save_dir", "lr_scale", "accumulate"})
WHOLE_FILE = "(file)"


@dataclass
class DriftItem:
    """One difference: in `file`, `key` (dotted for nested values) was `was` and is `now` (None: absent)."""

    file: str
    key: str
    was: Any
    now: Any

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form."""
        return asdict(self)


def _load_yaml(path: Path) -> tuple[Any, str | None]:
    import yaml

    from yolotui import safe_yaml

    try:
        return safe_yaml.load_file(path), None
    except FileNotFoundError:
        return None, "missing"
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"unreadable: {exc}"
    except safe_yaml.YamlLimitError as exc:
        return None, str(exc)
    except yaml.YAMLError as exc:
        return None, f"not valid YAML: {str(exc).splitlines()[0]}"


def data_fingerprint(path: Path) -> dict[str, Any]:
    """What to record at start for the data YAML: {'data_sha256': hex, 'data_config': parsed mapping}."""
    path = Path(path)
    raw = path.read_bytes()
    parsed, _ = _load_yaml(path)
    return {DATA_SHA256_KEY: hashlib.sha256(raw).hexdigest(), DATA_CONFIG_KEY: parsed if isinstance(parsed, dict) else None}


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        if not value and prefix:
            out[prefix] = {}
        return out
    if isinstance(value, tuple):
        value = list(value)
    return {prefix: value}


def _normalise(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_normalise(v) for v in value]
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)  # 1 and 1.0 in a YAML file are the same setting
    return value


def diff_mappings(file: str, was: dict[str, Any], now: dict[str, Any], ignore: frozenset[str] = frozenset(),
                  new_keys: bool = True) -> list[DriftItem]:
    """Keys whose values differ between two mappings (nested keys dotted), sorted by key.

    `new_keys=False` leaves out keys only `now` has (opt.yaml writers add defaults the baseline lacks).
    """
    flat_was = {k: v for k, v in _flatten(was).items() if k.split(".")[0] not in ignore}
    flat_now = {k: v for k, v in _flatten(now).items() if k.split(".")[0] not in ignore}
    items = []
    for key in sorted(set(flat_was) | (set(flat_now) if new_keys else set())):
        a, b = flat_was.get(key), flat_now.get(key)
        if _normalise(a) != _normalise(b) or (key in flat_was) != (key in flat_now):
            items.append(DriftItem(file, key, a, b))
    return items


def first_start_event(run_dir: Path, head_bytes: int = 1024 * 1024) -> dict[str, Any]:
    """The run's first `start` event (read from the head of events.jsonl only); {} when none."""
    try:
        with open(Path(run_dir) / EVENTS_JSONL, "rb") as handle:
            data = handle.read(head_bytes)
    except OSError:
        return {}
    for event in parse_lines(data)[0]:
        if event.get("type") == "start":
            return dict(event)
    return {}


def _resolve_data_path(value: str, run_dir: Path, run_yaml: dict[str, Any]) -> Path | None:
    candidate = Path(value).expanduser()
    if candidate.is_absolute():
        return candidate
    bases = [Path(run_yaml["cwd"])] if isinstance(run_yaml.get("cwd"), str) else []
    bases += [run_dir, Path.cwd()]
    for base in bases:
        if (base / candidate).is_file():
            return base / candidate
    return bases[0] / candidate


def _compare_file(file: str, path: Path, baseline: dict[str, Any] | None, ignore: frozenset[str] = frozenset(),
                  new_keys: bool = True) -> list[DriftItem]:
    if not baseline:  # no baseline, or an empty one: nothing to compare against (never "everything changed")
        return []
    now, problem = _load_yaml(path)
    if problem:
        return [DriftItem(file, WHOLE_FILE, "present", problem)]
    if not isinstance(now, dict):
        return [DriftItem(file, WHOLE_FILE, "a mapping", type(now).__name__)]
    return diff_mappings(file, baseline, now, ignore, new_keys)


def check_drift(run_dir: Path, checkpoint_opt: dict[str, Any] | None = None,
                checkpoint_hyp: dict[str, Any] | None = None, ignored: frozenset[str] = frozenset()) \
        -> list[DriftItem]:
    """Differences between the run's config files now and what it started with (see the module doc).

    `checkpoint_opt` / `checkpoint_hyp`: the dicts read from the run's checkpoint (taken from
    weights/last.pt when not given). `ignored`: more opt.yaml keys that are not drift for this run (the
    official trainer's own, yolotui/backends/official/diagnosis.py).
    """
    run_dir = Path(run_dir)
    if checkpoint_opt is None and checkpoint_hyp is None:
        checkpoint_opt, checkpoint_hyp = _checkpoint_configs(run_dir)
    start = first_start_event(run_dir)
    run_yaml, _ = _load_yaml(run_dir / RUN_YAML)
    run_yaml = run_yaml if isinstance(run_yaml, dict) else {}
    opt_base = checkpoint_opt if isinstance(checkpoint_opt, dict) else (start.get("opt") or start.get("config"))
    hyp_base = checkpoint_hyp if isinstance(checkpoint_hyp, dict) else start.get("hyp")
    if hyp_base is None and isinstance(opt_base, dict) and isinstance(opt_base.get("hyp"), dict):
        hyp_base = opt_base["hyp"]
    items = _compare_file(OPT_YAML, run_dir / OPT_YAML, opt_base if isinstance(opt_base, dict) else None,
                          IGNORED_OPT_KEYS | ignored, new_keys=False)
    # Keys the baseline lacks were defaults when the run started; writing them out later is not a change.
    items += _compare_file(HYP_YAML, run_dir / HYP_YAML, hyp_base if isinstance(hyp_base, dict) else None,
                           ignored, new_keys=False)
    items += _data_drift(run_dir, run_yaml, start)
    return items


def _data_drift(run_dir: Path, run_yaml: dict[str, Any], start: dict[str, Any]) -> list[DriftItem]:
    recorded_hash = run_yaml.get(DATA_SHA256_KEY) or start.get(DATA_SHA256_KEY)
    recorded_config = run_yaml.get(DATA_CONFIG_KEY) or start.get(DATA_CONFIG_KEY)
    if not recorded_hash:
        return []
    opt_now, _ = _load_yaml(run_dir / OPT_YAML)
    data_value = (opt_now or {}).get("data") if isinstance(opt_now, dict) else None
    data_value = data_value or run_yaml.get("data") or start.get("data")
    if not isinstance(data_value, str):
        return []
    path = _resolve_data_path(data_value, run_dir, run_yaml)
    label = path.name if path else data_value
    try:
        now_hash = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        return [DriftItem(label, WHOLE_FILE, "present", f"unreadable: {exc.strerror or exc}")]
    if now_hash == recorded_hash:
        return []
    if isinstance(recorded_config, dict):
        now, problem = _load_yaml(path)
        if problem or not isinstance(now, dict):
            return [DriftItem(label, WHOLE_FILE, "a mapping", problem or type(now).__name__)]
        items = diff_mappings(label, recorded_config, now)
        if items:
            return items
    return [DriftItem(label, "sha256", str(recorded_hash)[:12], now_hash[:12])]


def _checkpoint_configs(run_dir: Path) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    from yolotui.health.checkpoint import inspect_checkpoint
    from yolotui.runs.layout import BEST_PT, LAST_PT, WEIGHTS_DIR

    for name in (LAST_PT, BEST_PT):
        path = run_dir / WEIGHTS_DIR / name
        if path.is_file():
            info = inspect_checkpoint(path, verify_hash=False)
            if info.opt is not None or info.hyp is not None:
                return info.opt, info.hyp
    return None, None
