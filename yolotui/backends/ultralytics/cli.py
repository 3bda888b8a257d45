"""`yolotui train --backend ultralytics --model M --data D [--epochs N --imgsz S --batch B --device D --workers W
--project P --name N --exist-ok] [--python EXE] [key=value ...]`: ultralytics' trainer, supervised.

yolotui's flags become ultralytics arguments (model=, data=, epochs=, imgsz=, batch=, device=, workers=,
project=, name=, exist_ok=); any `key=value` given as well passes through to ultralytics unchanged (lr0=0.001,
optimizer=SGD, plots=False ...). `train_plan` turns the parsed flags into the new run's plan (start.py).
"""

from __future__ import annotations

from typing import Any

from yolotui.errors import UserError

# yolotui flags that take a value (so the token after them is not an ultralytics argument)
VALUE_FLAGS = frozenset({
    "--backend", "--python", "--model", "--data", "--epochs", "--batch", "--batch-size", "--imgsz", "--img",
    "--img-size", "--device", "--workers", "--project", "--name", "--max-restarts", "--max-attempts",
    "--restart-backoff", "--notify", "--stall-timeout", "--log-config", "--log-level", "--repo", "--script"})
# yolotui options `yolotui train` maps to ultralytics arguments; other training options do not apply
MAPPED = {"data": "data", "epochs": "epochs", "batch_size": "batch", "imgsz": "imgsz", "device": "device",
          "workers": "workers"}
RUN_PLACE = ("project", "name", "exist_ok")


def passthrough(raw: list[str]) -> list[str]:
    """The ultralytics `key=value` arguments among `yolotui train`'s own; UserError for anything else."""
    out, i = [], 0
    while i < len(raw):
        token = raw[i]
        if token.startswith("-"):
            flag = token.partition("=")[0]
            i += 2 if flag in VALUE_FLAGS and "=" not in token else 1
            continue
        if "=" not in token:
            raise UserError(f"{token!r}: with --backend ultralytics give ultralytics arguments as key=value "
                            "(e.g. lr0=0.001) after yolotui's flags")
        out.append(token)
        i += 1
    return out


def ultralytics_args(args: Any, given: dict[str, Any]) -> list[str]:
    """The ultralytics training arguments for `yolotui train --backend ultralytics`."""
    if not args.model:
        raise UserError("--backend ultralytics needs --model (e.g. --model yolov9t.yaml or --model yolov9c.pt)")
    unsupported = sorted(k for k in given if k not in MAPPED and k not in RUN_PLACE)
    if unsupported:
        flags = ", ".join("--" + k.replace("_", "-") for k in unsupported)
        verb = "does" if len(unsupported) == 1 else "do"
        raise UserError(f"{flags} {verb} not apply to --backend ultralytics: give ultralytics arguments as "
                        "key=value instead (see `yolo cfg`)")
    if "data" not in given:
        raise UserError("--backend ultralytics needs --data (a data.yaml with path, train, val and names)")
    out = ["train", f"model={args.model}"]
    out += [f"{ours}={given[key]}" for key, ours in MAPPED.items() if given.get(key) is not None]
    if given.get("project"):
        out.append(f"project={given['project']}")
    if given.get("name"):
        out.append(f"name={given['name']}")
    if given.get("exist_ok"):
        out.append("exist_ok=True")
    return out + passthrough(list(getattr(args, "raw_argv", []) or []))


def train_plan(args: Any, given: dict[str, Any]) -> Any:
    """The new run of `yolotui train --backend ultralytics` (`given`: the training flags given)."""
    import sys

    from yolotui.backends.ultralytics.recognise import CLI, UltralyticsCommand
    from yolotui.backends.ultralytics.start import plan_start

    given = dict(given)
    for key in RUN_PLACE:
        if key in vars(args) and key not in given:
            given[key] = vars(args)[key]
    cmd = UltralyticsCommand(python=args.python or sys.executable, mode=CLI, args=ultralytics_args(args, given))
    return plan_start(cmd)
