"""Write docs/reference/cli.md from yolotui's argparse tree, so the CLI reference can never drift from the code.

    python docs/gen_cli_reference.py            # rewrite docs/reference/cli.md
    python docs/gen_cli_reference.py --check    # exit 1 when the committed page is not what the parser says

Every subcommand gets its description and usage line, then one table per argument group: each flag (with its
aliases and metavar), its default and its help text. Flags hidden from --help (argparse.SUPPRESS: spelling
aliases such as --img for --imgsz) are left out here too. tests/test_cli_help.py runs the check.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "reference" / "cli.md"

HEADER = """# Command line

Every `yolotui` command and flag, generated from the parser itself (`python docs/gen_cli_reference.py`; a test
fails when this page is out of date). `yolotui COMMAND --help` prints the same. RUN is a run name from
`yolotui ls` (or a unique end of one, such as `train/exp2`) or a run folder. Shell completion:
`yolotui completion bash|zsh|fish` (see [the end of this page](#shell-completion)).
"""

FOOTER = """## Shell completion

`yolotui completion SHELL` prints a completion script for bash, zsh or fish: subcommands, flags, files where a
flag takes a path, and run names from yolotui's run index where a command takes RUN.

```bash
yolotui completion bash > ~/.local/share/bash-completion/completions/yolotui    # bash
yolotui completion zsh > "${fpath[1]}/_yolotui"                                  # zsh (a folder on $fpath)
yolotui completion fish > ~/.config/fish/completions/yolotui.fish                # fish
```
"""


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subparsers of `parser` by name, in the order they were added (empty when it has none)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def subcommand_help(parser: argparse.ArgumentParser) -> dict[str, str]:
    """The one-line help each subcommand of `parser` was registered with."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {choice.dest: choice.help or "" for choice in action._choices_actions}
    return {}


def visible_actions(group: argparse._ArgumentGroup) -> list[argparse.Action]:
    """The arguments of one group that --help shows (not --help itself, not SUPPRESSed aliases, not subparsers)."""
    return [a for a in group._group_actions
            if a.help != argparse.SUPPRESS and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def flag_text(action: argparse.Action) -> str:
    """`--flag, -f VALUE` as --help writes it (positional arguments by their metavar or name)."""
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    takes_value = action.nargs != 0
    metavar = ""
    if takes_value:
        if action.metavar is not None:
            metavar = " " + (" ".join(action.metavar) if isinstance(action.metavar, tuple) else action.metavar)
        elif action.choices is not None:
            metavar = " {" + ",".join(str(c) for c in action.choices) + "}"
        else:
            metavar = " " + action.dest.upper()
        if action.nargs in ("?",):
            metavar = f" [{metavar.strip()}]"
        elif action.nargs in ("*", "+"):
            metavar += " ..."
    return ", ".join(f"`{opt}{metavar}`" for opt in action.option_strings)


def default_text(action: argparse.Action) -> str:
    """The default worth showing: none for switches, unset values and lists that start empty."""
    default = action.default
    if action.nargs == 0 or default in (None, argparse.SUPPRESS, "", [], False):
        return ""
    return f"`{default}`"


def help_text(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help string with argparse's %(default)s-style expansions done, as --help prints it."""
    formatter = parser._get_formatter()
    return formatter._expand_help(action) if action.help else ""


def render_command(path: list[str], parser: argparse.ArgumentParser, one_line: str) -> list[str]:
    """The Markdown section of one (sub)command, then those of its own subcommands."""
    title = " ".join(path)
    out = [f"## `{title}`", ""]
    description = parser.description or one_line
    if description:
        out += [description.strip(), ""]
    usage = " ".join(parser.format_usage().split())
    out += ["```text", usage, "```", ""]
    for group in parser._action_groups:
        actions = visible_actions(group)
        if not actions:
            continue
        out += [f"**{group.title}**", ""] if group.title not in ("options", "optional arguments") else []
        out += ["| argument | default | help |", "| --- | --- | --- |"]
        for action in actions:
            out.append(f"| {flag_text(action)} | {default_text(action)} | {cell(help_text(parser, action))} |")
        out.append("")
    helps = subcommand_help(parser)
    for name, child in subcommands(parser).items():
        out += render_command([*path, name], child, helps.get(name, ""))
    return out


def render() -> str:
    """The whole reference page."""
    from yolotui.cli import build_parser

    parser = build_parser(None)
    lines = [HEADER]
    helps = subcommand_help(parser)
    commands = subcommands(parser)
    lines += ["| command | what it does |", "| --- | --- |"]
    for name in commands:
        anchor = "yolotui-" + name
        lines.append(f"| [`yolotui {name}`](#{anchor}) | {cell(helps.get(name, ''))} |")
    lines.append("")
    for name, child in commands.items():
        lines += render_command(["yolotui", name], child, helps.get(name, ""))
    lines.append(FOOTER)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the page, or with --check say whether the committed one is current."""
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--check", action="store_true", help="exit 1 when docs/reference/cli.md is out of date")
    options = args.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    text = render()
    if options.check:
        current = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
        if current != text:
            print(f"{PAGE.relative_to(ROOT)} is out of date: run python docs/gen_cli_reference.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
