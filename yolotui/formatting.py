"""The one formatter for what yolotui shows people: ages, sizes, epochs, durations, times.

One convention everywhere (CLI tables, TUI panels, doctor reports):
- ages are compact and truncated: `42s`, `5m`, `3h` (up to 47h), then `2d`;
- sizes are 1024-based with IEC units: `719 B`, `3.4 KiB`, `101.2 MiB`, `1.3 GiB`;
- durations are clock-like: `4:05`, `1:02:03`, and `2d03h` from two days on;
- epochs: ONE numbering everywhere (ls, status, doctor, val, the dashboard, the wizards, plain-text follow).
  `k/N` always means *k epochs done* of N planned, never the index of the epoch in progress: `epochs(5, 50)` is
  `5/50`, `epochs_done(5, 50)` is `5/50 epochs done`, and a checkpoint saved mid-epoch adds the batches done in
  the next epoch, `5/50 epochs done + 12 batches of epoch 6`. The epoch being trained is named by its ordinal
  with words, never a slash: `epoch_in_progress(5, 50)` is `epoch 6 of 50` (5 done, the 6th running).
  So the dashboard (`epoch 6 of 50` running, overall `5/50`), the resume wizard (`resume as is (5/50 epochs
  done)`) and doctor (`resumes after 5/50 epochs done`) agree about the same run;
- speeds: `speed(0.42)` is `0.4 img/s` (one decimal under 10), `speed(42.4)` is `42 img/s`.
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


def epochs_done(done: int | None, planned: int | None, step: int | None = None,
                unknown: str = UNKNOWN) -> str:
    """'5/50 epochs done' ('5 epochs done' with no plan); with a mid-epoch `step`, '5/50 epochs done + 12 batches
    of epoch 6' (see the module docstring)."""
    if done is None and planned is None:
        return unknown
    text = f"{epochs(done, planned)} epochs done" if planned is not None else f"{plural(done or 0, 'epoch')} done"
    if step:
        text += f" + {step} batch{'es' if step != 1 else ''} of epoch {(done or 0) + 1}"
    return text


def epoch_in_progress(done: int | None, planned: int | None, unknown: str = UNKNOWN) -> str:
    """The epoch being trained, by ordinal: 'epoch 6 of 50' when 5 are done; 'epoch 6' with no plan."""
    if done is None:
        return unknown
    return f"epoch {done + 1}" + (f" of {planned}" if planned is not None else "")


def speed(per_second: float | None, unit: str = "img/s", unknown: str = UNKNOWN) -> str:
    """A rate: one decimal under 10 ('0.4 img/s', '7.5 img/s'), whole numbers from 10 ('1,234 img/s')."""
    if per_second is None or per_second != per_second or per_second < 0:
        return unknown
    return f"{per_second:.1f} {unit}" if per_second < 10 else f"{per_second:,.0f} {unit}"


def plural(count: int, word: str, many: str | None = None) -> str:
    """'1 run', '2 runs', '0 runs' (`many` for irregular plurals)."""
    return f"{count} {word if count == 1 else (many or word + 's')}"


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


def _escape_char(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object) -> str:
    """`text` safe to print on a terminal: control characters (ESC, C0, DEL, C1; also line breaks and tabs)
    are shown escaped as `\\x1b` ..., so a run name can neither recolour, move the cursor nor fake a line."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or (ch == " ") else _escape_char(ch) for ch in text)
