"""Logging the way users configure it: a `logging.config.dictConfig` YAML, levels, default handlers.

The supervisor and the trainer log through `logging` under named loggers: `yolotui.supervisor`,
`yolotui.trainer`, `yolotui.data`, `yolotui.ddp`. With nothing configured, each process has one default
handler on the `yolotui` logger writing to its stdout (the trainer's is train.log, the supervisor's
supervisor.log) in the format those files always had: the trainer's lines are the bare message, the
supervisor's `[YYYY-mm-dd HH:MM:SS] message`; records below INFO or at WARNING and above carry their level
name first (`WARNING: ...`) so `yolotui logs --level` can filter them.

A user's handler that writes to the process's stdout itself (`stream: ext://sys.stdout`) replaces the default
one, so lines are not written twice. `--log-config FILE` (or settings.yaml `log_config`) adds a dictConfig YAML: it is read with the project's YAML
reader (size bound, file and line named on a syntax error) and checked before anything detaches
(`validate`: one line naming the file and the bad key), recorded in run.yaml under `logging` (the file's path
and its parsed content; a handler's relative `filename` is made absolute from the YAML's own folder, since the
supervisor and the trainer run in different folders), and re-applied by the supervisor and by every attempt
of the trainer. The default
handler stays, so train.log keeps its lines; the user's handlers receive the records too (the `yolotui` logger
propagates to root). `--log-level DEBUG|INFO|WARNING` sets the default handler's level.

Also the supervisor's own log: `log()` writes a record of the `yolotui.supervisor` logger, whose default handler
writes RUN/supervisor.log.
"""

from __future__ import annotations

import inspect
import logging
import logging.config
import sys
import time
from pathlib import Path
from typing import Any

from yolotui.errors import UserError

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
TOP_KEYS = frozenset({"version", "formatters", "filters", "handlers", "loggers", "root", "incremental",
                      "disable_existing_loggers"})
HANDLER_KEYS = frozenset({"class", "level", "formatter", "filters", "()", "."})
LOGGER_KEYS = frozenset({"level", "propagate", "filters", "handlers"})
FORMATTER_KEYS = frozenset({"format", "datefmt", "style", "validate", "defaults", "class", "()", "."})
MAX_BYTES = 256 * 1024
DEFAULT_HANDLER = "yolotui.default"
TRAINER_FORMAT = "%(message)s"
SUPERVISOR_FORMAT = "[%(asctime)s] %(message)s"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S"


def check_level(value: Any, where: str) -> str:
    """An upper-case level name; UserError naming `where` otherwise."""
    text = str(value).upper() if value is not None else ""
    if text not in LEVELS and text != "NOTSET":
        raise UserError(f"{where}: level {value!r} is not one of {', '.join(LEVELS)}")
    return text


def load(path: Path) -> dict[str, Any]:
    """Read and check a logging YAML; UserError with one line naming the file and the bad key."""
    from yolotui.safe_yaml import load_mapping

    path = Path(path).expanduser()
    config = load_mapping(path, "--log-config", MAX_BYTES)
    validate(config, f"--log-config {path}")
    for spec in (config.get("handlers") or {}).values():  # the supervisor and the trainer run in other folders
        if isinstance(spec.get("filename"), str) and not Path(spec["filename"]).expanduser().is_absolute():
            spec["filename"] = str((path.parent / spec["filename"]).resolve())
    return config


def _resolve(name: Any, where: str) -> Any:
    try:
        return logging.config.BaseConfigurator({}).resolve(str(name))
    except (ImportError, ValueError, AttributeError) as exc:
        raise UserError(f"{where}: class {name!r} cannot be imported ({exc})") from None


def _check_kwargs(cls: Any, kwargs: dict[str, Any], where: str) -> None:
    """Every extra key of a handler must be an argument of its class's constructor."""
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return
    for key in kwargs:
        if key not in params:
            allowed = ", ".join(sorted([*HANDLER_KEYS - {"()", "."}, *params]))
            raise UserError(f"{where}: unknown key {key!r} for {getattr(cls, '__name__', cls)}; allowed: {allowed}")


def validate(config: Any, where: str) -> None:
    """Check a dictConfig mapping without applying it; UserError naming `where` and the first bad key."""
    if not isinstance(config, dict):
        raise UserError(f"{where}: expected a mapping in the logging.config.dictConfig schema")
    if config.get("version") != 1:
        raise UserError(f"{where}: key 'version' must be 1 (the dictConfig schema version)")
    for key in config:
        if key not in TOP_KEYS:
            raise UserError(f"{where}: unknown key {key!r}; allowed: {', '.join(sorted(TOP_KEYS))}")
    sections = {}
    for section in ("formatters", "filters", "handlers", "loggers"):
        value = config.get(section) or {}
        if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
            raise UserError(f"{where}: '{section}' must map names to mappings")
        sections[section] = value
    for name, spec in sections["formatters"].items():
        for key in spec:
            if key not in FORMATTER_KEYS:
                raise UserError(f"{where}: formatters.{name}: unknown key {key!r}; allowed: "
                                f"{', '.join(sorted(FORMATTER_KEYS - {'()', '.'}))}")
    for name, spec in sections["handlers"].items():
        at = f"{where}: handlers.{name}"
        if "class" not in spec and "()" not in spec:
            raise UserError(f"{at}: key 'class' is required (e.g. logging.FileHandler)")
        if "level" in spec:
            check_level(spec["level"], at)
        if spec.get("formatter") is not None and spec["formatter"] not in sections["formatters"]:
            raise UserError(f"{at}: formatter {spec['formatter']!r} is not defined under 'formatters'")
        if "class" in spec:
            cls = _resolve(spec["class"], at)
            _check_kwargs(cls, {k: v for k, v in spec.items() if k not in HANDLER_KEYS}, at)
    loggers = dict(sections["loggers"])
    if config.get("root") is not None:
        if not isinstance(config["root"], dict):
            raise UserError(f"{where}: 'root' must be a mapping (level, handlers)")
        loggers["root"] = config["root"]
    for name, spec in loggers.items():
        at = f"{where}: {'root' if name == 'root' and 'root' in config else 'loggers.' + name}"
        for key in spec:
            if key not in LOGGER_KEYS:
                raise UserError(f"{at}: unknown key {key!r}; allowed: {', '.join(sorted(LOGGER_KEYS))}")
        if "level" in spec:
            check_level(spec["level"], at)
        for handler in spec.get("handlers") or []:
            if handler not in sections["handlers"]:
                raise UserError(f"{at}: handler {handler!r} is not defined under 'handlers'")


class LevelPrefixFormatter(logging.Formatter):
    """The unchanged format, with `LEVEL: ` before the message of records that are not INFO."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        text = super().formatMessage(record)
        if record.levelno == logging.INFO:
            return text
        return text.replace(record.message, f"{record.levelname}: {record.message}", 1)


def _lowest_handler_level(config: dict[str, Any] | None) -> int:
    levels = [logging.getLevelName(check_level(spec.get("level", "NOTSET"), "handler"))
              for spec in ((config or {}).get("handlers") or {}).values()]
    levels = [lv if lv else logging.DEBUG for lv in levels]
    return min(levels) if levels else logging.INFO


def apply(logging_entry: dict[str, Any] | None, role: str, stream: Any = None) -> None:
    """Configure this process's logging from run.yaml's `logging` entry (config, level) for `role`.

    `role` is "trainer" or "supervisor": it picks the default handler's format. Safe to call again (each attempt).
    """
    entry = logging_entry or {}
    config = entry.get("config")
    level = logging.getLevelName(check_level(entry.get("level") or "INFO", "--log-level"))
    top = logging.getLogger("yolotui")
    for handler in [h for h in top.handlers if h.get_name() == DEFAULT_HANDLER]:
        top.removeHandler(handler)
    if config:
        logging.config.dictConfig({"disable_existing_loggers": False, **config})
    stream = stream or sys.stdout
    named = "yolotui" in ((config or {}).get("loggers") or {})
    if not named:
        top.setLevel(min(level, _lowest_handler_level(config) if config else level))
    if config and _writes_to(stream):
        return  # the user's own handler writes to train.log / supervisor.log: theirs replaces the default
    handler = logging.StreamHandler(stream)
    handler.set_name(DEFAULT_HANDLER)
    handler.setLevel(level)
    if role == "supervisor":
        handler.setFormatter(LevelPrefixFormatter(SUPERVISOR_FORMAT, DATE_FORMAT))
    else:
        handler.setFormatter(LevelPrefixFormatter(TRAINER_FORMAT))
    top.addHandler(handler)


def _writes_to(stream: Any) -> bool:
    """True when a handler of the root or a yolotui logger already writes to `stream`."""
    names = ["", *[n for n in logging.root.manager.loggerDict if n == "yolotui" or n.startswith("yolotui.")]]
    for name in names:
        for handler in logging.getLogger(name).handlers:
            if isinstance(handler, logging.StreamHandler) and getattr(handler, "stream", None) is stream:
                return True
    return False


def entry_for(config_path: str | None, level: str | None) -> dict[str, Any] | None:
    """run.yaml's `logging` entry for `--log-config`/`--log-level` (validated), or None when neither is given."""
    if not config_path and not level:
        return None
    entry: dict[str, Any] = {"level": check_level(level, "--log-level") if level else "INFO"}
    if config_path:
        path = Path(config_path).expanduser().resolve()
        entry["config_file"] = str(path)
        entry["config"] = load(path)
    return entry


def level_of_line(line: str) -> int:
    """The level of one log line: its `LEVEL: ` prefix, else what its text shows (tracebacks, NCCL INFO ...)."""
    text = line.split("] ", 1)[1] if line.startswith("[") and "] " in line[:24] else line
    head = text.split(":", 1)[0].strip().upper()
    if head in LEVELS:
        return logging.getLevelName(head)
    lowered = text.lower()
    if "===== yolotui:" in text:
        return logging.CRITICAL  # attempt markers: always shown
    if text.startswith(("Traceback", "  File ", "    ")) or "error" in lowered.split(":", 1)[0]:
        return logging.ERROR
    if "warning" in lowered[:40] or lowered.startswith("warn"):
        return logging.WARNING
    if "nccl info" in lowered or (lowered.startswith("[rank") and "debug" in lowered):
        return logging.DEBUG  # NCCL_DEBUG=INFO and TORCH_DISTRIBUTED_DEBUG=DETAIL chatter
    return logging.INFO


# -- the supervisor's own log -------------------------------------------------------------------------------
LOG = logging.getLogger("yolotui.supervisor")


def log(message: str, level: int = logging.INFO) -> None:
    """A record of the `yolotui.supervisor` logger: by default a timestamped line on the supervisor's own log
    (its stdout is RUN/supervisor.log); a --log-config adds its handlers (yolotui/logconfig.py). Never
    raises: logging's handlers swallow write errors such as a full disk."""
    LOG.log(level, message)


def now_iso(ts: float | None = None) -> str:
    """Local time as `YYYY-mm-dd HH:MM:SS`, for train.log's attempt markers."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts if ts is not None else time.time()))
