"""Every `yolotui ...` command line in README.md and docs/ names a real subcommand and real flags.

Command lines are read from code blocks (fenced or indented: the start of a line, after a `$ ` prompt or
environment assignments, or after `&&`, `;`, `|`) and from inline code that starts with `yolotui `. Each is checked
against the parser: the subcommand exists, and every --flag (or -f) given before a lone `--` is one of its flags.
Placeholders (`...`, RUN, COMMAND) and the official/ultralytics trainers' pass-through flags are not checked.
"""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

from yolotui.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parent.parent
INLINE = re.compile(r"`(yolotui(?: [^`]*)?)`")
SEPARATORS = re.compile(r"\s(?:\|\||&&|\||;)\s|\$\(")
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*$")


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def code_lines(text: str) -> list[tuple[int, str]]:
    """(line number, text) of the lines inside code blocks, with `\\` continuations joined."""
    out: list[tuple[int, str]] = []
    fenced = False
    pending: tuple[int, str] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced and not line.startswith("    "):
            pending = None
            continue
        if pending is not None:
            line, number = pending[1].rstrip() + " " + line.strip(), pending[0]
        if line.rstrip().endswith("\\"):
            pending = (number, line.rstrip()[:-1])
            continue
        pending = None
        out.append((number, line.strip()))
    return out


def commands_in_line(line: str) -> list[list[str]]:
    """The `yolotui` command lines in one shell line, as token lists (starting after `yolotui`)."""
    found = []
    for segment in SEPARATORS.split(line):
        segment = segment.strip()
        if segment.startswith("$ "):
            segment = segment[2:]
        try:
            tokens = shlex.split(segment, comments=True)
        except ValueError:
            tokens = segment.split()
        while tokens and ENV_ASSIGNMENT.match(tokens[0]):
            tokens = tokens[1:]
        if tokens and (tokens[0] == "yolotui" or tokens[0].endswith("/bin/yolotui")):
            found.append(tokens[1:])
    return found


def all_commands() -> list[tuple[str, list[str]]]:
    """(where, tokens) of every yolotui command line in the documentation."""
    found = []
    for path in doc_files():
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(ROOT)
        for number, line in code_lines(text):
            found += [(f"{where}:{number}", tokens) for tokens in commands_in_line(line)]
        for number, line in enumerate(text.splitlines(), 1):
            for span in INLINE.findall(line):
                found += [(f"{where}:{number}", tokens) for tokens in commands_in_line(span)]
    return found


def _options_below(parser: argparse.ArgumentParser) -> set[str]:
    """The option strings of `parser` and of its own subcommands (`hosts add --yolotui`), at any depth."""
    found = {s for a in parser._actions for s in a.option_strings}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found |= _options_below(child)
    return found


def flags_by_command() -> dict[str, set[str]]:
    """Every option string of every subcommand, hidden aliases included (they work when typed)."""
    parser = build_parser(None)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    flags = {name: _options_below(child) for name, child in sub.choices.items()}
    flags[""] = {s for a in parser._actions for s in a.option_strings}
    return flags


def problems_of(tokens: list[str], flags: dict[str, set[str]]) -> list[str]:
    """What is wrong with one command line (empty when every subcommand and flag is real)."""
    if not tokens:
        return []
    command, rest = tokens[0], tokens[1:]
    if command.startswith("-"):  # `yolotui --theme NAME` opens the TUI; `yolotui --version`
        command, rest = ("tui" if command.startswith("--theme") else ""), tokens
    elif not re.fullmatch(r"[a-z][a-z-]*", command):
        return []  # a placeholder: `yolotui ...`, `yolotui COMMAND --help`
    if command not in flags:
        return [f"no subcommand {command!r}"]
    if "--backend" in rest or any(t.startswith("--backend=") for t in rest):
        return []  # the official and ultralytics trainers take their own flags through `yolotui train`
    wrong = []
    for token in rest:
        if token == "--":
            break
        word = token.strip("[]()").split("=", 1)[0]
        if re.fullmatch(r"--[a-z0-9][a-z0-9-]*|-[a-zA-Z]", word) and word not in flags[command]:
            wrong.append(f"yolotui {command or ''}: no flag {word}")
    return wrong


def test_documented_commands_name_real_subcommands_and_flags():
    flags = flags_by_command()
    commands = all_commands()
    assert len(commands) > 100, "the documentation's command lines were not found"
    found = {tokens[0] for _, tokens in commands if tokens}
    assert {"train", "resume", "exec", "completion"} <= found
    wrong = [f"{where}: {problem}" for where, tokens in commands for problem in problems_of(tokens, flags)]
    assert wrong == [], "\n".join(wrong)


def test_the_check_catches_a_wrong_subcommand_and_a_wrong_flag():
    flags = flags_by_command()
    line = "YOLOTUI_HOME=/tmp/x yolotui train --data d.yaml --epohcs 3 && yolotui trian RUN | less"
    problems = [p for tokens in commands_in_line(line) for p in problems_of(tokens, flags)]
    assert problems == ["yolotui train: no flag --epohcs", "no subcommand 'trian'"]
    assert problems_of(["exec", "--name", "x", "--", "python", "train.py", "--epohcs", "3"], flags) == []
    assert set(COMMANDS) <= set(flags)


def test_code_lines_joins_continuations_and_skips_prose():
    text = "prose yolotui trian\n\n```bash\nyolotui train --data d \\\n    --epochs 3\n```\n\n    yolotui ls\n"
    assert code_lines(text) == [(4, "yolotui train --data d --epochs 3"), (8, "yolotui ls")]
