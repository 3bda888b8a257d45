"""Naming a notification target or hook command without its secrets: the one helper for every log line.

An apprise URL carries its credentials anywhere after the scheme: a host part (`tgram://BOTID:TOKEN`,
`pbul://TOKEN`, `pover://USER@TOKEN`), a password (`mailto://user:pass@host`) or a query
(`json://host?secret=abc`). So a target is shown as its scheme and a short hash of the whole URL, nothing
else: `tgram://…#a1b2c3`; the hash tells two targets apart (`yolotui notify test` lists them in the order
they are configured). A hook command may hold a token among its arguments, so it is shown as
`hook command …#d4e5f6`.

Text that may quote a target (an exception, apprise's reason, a hook's stderr) goes through `scrub`, which
replaces every piece of the URL or command that could be a secret with `…`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from urllib.parse import unquote

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,31}")
_PIECES = re.compile(r"[\s:/@?&=#,;'\"]+")
MIN_PIECE = 4  # shorter pieces (a port, `on`) are no secret and would blank out common words


def short_hash(text: str) -> str:
    """Six hex digits of the text's SHA-256: enough to tell a user's few targets apart, useless to guess from."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:6]


def target_label(url: str) -> str:
    """`scheme://…#hash` for an apprise URL (`url://…#hash` when it has no scheme)."""
    scheme, sep, _ = str(url).partition("://")
    if not sep or not _SCHEME.fullmatch(scheme):
        scheme = "url"
    return f"{scheme.lower()}://…#{short_hash(str(url))}"


def command_label(command: str) -> str:
    """`hook command …#hash` for a notification hook's shell command."""
    return f"hook command …#{short_hash(str(command))}"


def secret_pieces(value: str) -> list[str]:
    """The parts of a URL (after its scheme) or a command that could be a secret, longest first."""
    value = str(value)
    scheme, sep, rest = value.partition("://")
    texts = {value, unquote(value)}
    if sep and _SCHEME.fullmatch(scheme):  # a URL: its scheme is no secret (and would blank out `json`)
        texts = {rest, unquote(rest)}
    pieces = set(texts)
    for text in texts:
        pieces.update(p for p in _PIECES.split(text) if len(p) >= MIN_PIECE)
    return sorted((p for p in pieces if len(p) >= MIN_PIECE), key=len, reverse=True)


def scrub(text: str, values: Iterable[str]) -> str:
    """`text` with every secret piece of each of `values` (URLs, commands) replaced by `…`."""
    text = str(text)
    pieces = sorted({p for v in values if v for p in secret_pieces(v)}, key=len, reverse=True)
    for piece in pieces:
        text = text.replace(piece, "…")
    return text
