"""Whose run folder is this: a resume runs what the folder says (run.yaml's command, its `queue:` and `notify`
entries, opt.yaml's paths), so a folder another user owns or could have written is not resumed unasked.

`foreign_files(run_dir)` lists the folder and those of its control files (run.yaml, opt.yaml, hyp.yaml,
status.json) that belong to another user; `refuse_foreign` turns that into a UserError unless forced.
The user id compared against is `current_uid()` (a function, so tests can play another user).
"""

from __future__ import annotations

import os
from pathlib import Path

from yolotui.errors import UserError
from yolotui.runs.layout import HYP_YAML, OPT_YAML, RUN_YAML, STATUS_JSON

CONTROL_FILES = (RUN_YAML, OPT_YAML, HYP_YAML, STATUS_JSON)


def current_uid() -> int:
    """The user yolotui acts for (the effective user id)."""
    return os.geteuid()


def owner_name(uid: int) -> str:
    """'alice (uid 1001)', or 'uid 1001' when the name is unknown."""
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def foreign_files(run_dir: Path) -> list[tuple[Path, int]]:
    """(path, owner uid) of the run folder and its control files that another user owns (links: their own)."""
    me = current_uid()
    found = []
    for path in (Path(run_dir), *(Path(run_dir) / name for name in CONTROL_FILES)):
        try:
            uid = os.lstat(path).st_uid
        except OSError:
            continue
        if uid != me:
            found.append((path, uid))
    return found


def refuse_foreign(run_dir: Path, force: bool = False, what: str = "resume") -> None:
    """UserError when another user owns the run folder or a file that says what it runs (unless `force`)."""
    if force:
        return
    found = foreign_files(run_dir)
    if not found:
        return
    path, uid = found[0]
    more = f" (and {len(found) - 1} more of its files)" if len(found) > 1 else ""
    raise UserError(f"{path} belongs to {owner_name(uid)}, not to you{more}: a {what} runs what this folder's "
                    f"run.yaml and opt.yaml say, so yolotui does not {what} another user's run unasked; read them "
                    f"first, then add --force to {what} it anyway")
