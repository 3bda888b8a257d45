"""Every subcommand and flag of `yolotui` explains itself, and docs/reference/cli.md is what the parser says."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from yolotui.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parent.parent


def load_generator():
    """docs/gen_cli_reference.py as a module (docs/ is no package)."""
    spec = importlib.util.spec_from_file_location("gen_cli_reference", ROOT / "docs" / "gen_cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def missing_help(parser: argparse.ArgumentParser, path: str = "yolotui") -> list[str]:
    """'yolotui train --foo' for every subcommand or argument (recursively) without help text.

    Arguments hidden on purpose (help=argparse.SUPPRESS: spelling aliases such as --img) are not missing."""
    missing: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, child in action.choices.items():
                if not (helps.get(name) or "").strip():
                    missing.append(f"{path} {name}")
                missing += missing_help(child, f"{path} {name}")
            continue
        if action.help == argparse.SUPPRESS:
            continue
        if not (action.help or "").strip():
            missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    return missing


def test_every_subcommand_and_flag_has_help():
    assert missing_help(build_parser(None)) == []


def test_the_check_finds_a_flag_and_a_subcommand_without_help():
    parser = argparse.ArgumentParser(prog="yolotui")
    sub = parser.add_subparsers(dest="command")
    good = sub.add_parser("good", help="does a thing")
    good.add_argument("--fine", help="explained")
    good.add_argument("--bare")
    good.add_argument("--hidden", help=argparse.SUPPRESS)
    sub.add_parser("silent")
    assert missing_help(parser) == ["yolotui good --bare", "yolotui silent"]


def test_reference_page_is_current():
    generator = load_generator()
    page = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    assert page == generator.render(), "docs/reference/cli.md is out of date: run python docs/gen_cli_reference.py"


def test_reference_page_names_every_subcommand_and_visible_flag():
    text = load_generator().render()
    parser = build_parser(None)
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(subparsers.choices) == set(COMMANDS)
    for name, child in subparsers.choices.items():
        assert f"## `yolotui {name}`" in text
        for action in child._actions:
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
                continue
            for option in action.option_strings:
                assert f"`{option}" in text, f"yolotui {name} {option} is missing from the reference"
