"""The one formatter for what yolotui shows people: ages, sizes, epochs, durations, times.

One convention everywhere (CLI tables, TUI panels, doctor reports):
- ages are compact and truncated: `42s`, `5m`, `3h` (up to 47h), then `2d`;
- sizes are 1024-based with IEC units: `719 B`, `3.4 KiB`, `101.2 MiB`, `1.3 GiB`;
- durations are clock-like: `4:05`, `1:02:03`, and `2d03h` from two days on;
- epochs are `done/planned`: `3/100`, `3/?`.
Every function takes the text to show for an unknown value (`--` by default; the CLI tables use `-`).
"""

from __future__ import annotations

import time

UNKNOWN = "--"


def age(seconds: float | None, unknown: str = UNKNOWN) -> str:
    """How long ago: '42s', '5m', '3h', '30h', '2d'; `unknown` for None."""
    if seconds is None or seconds != seconds:
        return unknown
    seconds = max(0.0, float(seconds))
    for limit, unit, scale in ((60, "s", 1), (3600, "m", 60), (2 * 86400, "h", 3600)):
        if seconds < limit:
            return f"{int(seconds // scale)}{unit}"
    return f"{int(seconds // 86400)}d"


def size(nbytes: int | float | None, unknown: str = UNKNOWN) -> str:
    """Bytes, 1024-based: '719 B', '3.4 KiB', '101.2 MiB', '1.3 GiB', '2.0 TiB'."""
    if nbytes is None:
        return unknown
    value = float(nbytes)
    if abs(value) < 1024:
        return f"{value:.0f} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}"
    return f"{value:.1f} TiB"  # not reached


def duration(seconds: float | None, unknown: str = UNKNOWN) -> str:
    """An elapsed time or ETA: '4:05', '1:02:03', '2d03h' from 48 hours on; `unknown` when None/negative."""
    if seconds is None or seconds != seconds or seconds < 0:
        return unknown
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours >= 48:
        return f"{hours // 24}d{hours % 24:02d}h"
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def epochs(done: int | None, planned: int | None, unknown: str = UNKNOWN) -> str:
    """'3/100', '3/?', '0/100'; `unknown` when both are unknown."""
    if done is None and planned is None:
        return unknown
    return f"{done if done is not None else 0}/{planned if planned is not None else '?'}"


def when(ts: float | None, unknown: str = UNKNOWN) -> str:
    """A unix time in local time as 'YYYY-MM-DD HH:MM'."""
    if not ts:
        return unknown
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def short_when(ts: float | None, unknown: str = UNKNOWN) -> str:
    """A unix time in local time as 'MM-DD HH:MM' (narrow tables)."""
    if not ts:
        return unknown
    return time.strftime("%m-%d %H:%M", time.localtime(ts))
